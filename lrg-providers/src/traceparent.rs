//! W3C Trace Context (`traceparent`) for what lrg sends: the header on
//! every model request, and the value other crates put elsewhere (MCP's
//! `_meta.traceparent`).
//!
//! The value comes from the current `tracing` span's OpenTelemetry context,
//! which exists only when the app's subscriber has a tracing-opentelemetry
//! layer (feature `otel`). Without the feature, or without such a layer, or
//! outside any span, there is none, and nothing is added: a request is
//! byte for byte what it was before tracing existed.

/// The header (and `_meta` key) name.
pub const TRACEPARENT: &str = "traceparent";

/// The `traceparent` of the current span, when it is sampled into an
/// OpenTelemetry trace.
pub fn current() -> Option<String> {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let span = tracing::Span::current();
        if span.is_disabled() {
            return None;
        }
        let cx = span.context();
        let sc = cx.span().span_context().clone();
        sc.is_valid().then(|| format(&sc))
    }
    #[cfg(not(feature = "otel"))]
    {
        None
    }
}

/// `sc` written as a `traceparent` value (version 00).
#[cfg(feature = "otel")]
pub fn format(sc: &opentelemetry::trace::SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    )
}

/// A `traceparent` value read back: `None` for anything malformed (wrong
/// length, not hex, all-zero ids, version `ff`), as the W3C spec says to
/// ignore such a header rather than fail the request.
#[cfg(feature = "otel")]
pub fn parse(value: &str) -> Option<opentelemetry::trace::SpanContext> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    let mut parts = value.trim().split('-');
    let version = parts.next()?;
    let trace = parts.next()?;
    let span = parts.next()?;
    let flags = parts.next()?;
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    // Version 00 has exactly four fields; a later one may add more.
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let sc = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & 1),
        true,
        TraceState::default(),
    );
    sc.is_valid().then_some(sc)
}

/// `request` with the current `traceparent` header, when there is one.
pub(crate) fn inject(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match current() {
        Some(value) => request.header(TRACEPARENT, value),
        None => request,
    }
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_it_writes_and_refuses_the_malformed() {
        let value = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let sc = parse(value).unwrap();
        assert_eq!(format(&sc), value);
        assert!(sc.is_remote() && sc.is_sampled());
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn nothing_outside_a_traced_span() {
        assert_eq!(current(), None);
    }
}
