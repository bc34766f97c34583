//! The GenAI client metrics and lrg's tool duration, on the global meter
//! provider (feature `otel`; without it these do nothing).
//!
//! The instruments are made on first use from whatever provider is global
//! then, so an app sets its provider before its first chat. Until one is
//! set, the global provider is OpenTelemetry's no-op one.

use std::time::Duration;

use lrg_providers::{ModelInfo, Usage};

#[cfg(feature = "otel")]
mod on {
    use std::sync::OnceLock;

    use opentelemetry::metrics::Histogram;

    /// Buckets the conventions recommend for token counts.
    const TOKEN_BUCKETS: [f64; 14] = [
        1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
        4194304.0, 16777216.0, 67108864.0,
    ];
    /// Buckets the conventions recommend for operation durations, in seconds.
    const DURATION_BUCKETS: [f64; 14] = [
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
    ];

    pub(super) struct Instruments {
        pub(super) tokens: Histogram<u64>,
        pub(super) operation: Histogram<f64>,
        pub(super) tool: Histogram<f64>,
    }

    pub(super) fn instruments() -> &'static Instruments {
        static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
        INSTRUMENTS.get_or_init(|| {
            let meter = opentelemetry::global::meter("lrg");
            Instruments {
                tokens: meter
                    .u64_histogram("gen_ai.client.token.usage")
                    .with_unit("{token}")
                    .with_description("Number of input and output tokens used")
                    .with_boundaries(TOKEN_BUCKETS.to_vec())
                    .build(),
                operation: meter
                    .f64_histogram("gen_ai.client.operation.duration")
                    .with_unit("s")
                    .with_description("GenAI operation duration")
                    .with_boundaries(DURATION_BUCKETS.to_vec())
                    .build(),
                tool: meter
                    .f64_histogram("lrg.tool.duration")
                    .with_unit("s")
                    .with_description("Duration of one tool call, approval wait excluded")
                    .with_boundaries(DURATION_BUCKETS.to_vec())
                    .build(),
            }
        })
    }
}

/// One model turn: its token counts (input and output, when reported) and
/// its duration, retries included; `error`: the `error.type` it failed with.
pub(crate) fn record_turn(
    info: &ModelInfo,
    usage: Option<&Usage>,
    elapsed: Duration,
    error: Option<&str>,
) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::KeyValue;
        let instruments = on::instruments();
        let mut attributes = vec![
            KeyValue::new(super::ATTR_OPERATION_NAME, "chat"),
            KeyValue::new(
                super::ATTR_PROVIDER_NAME,
                super::provider_name(&info.provider).to_string(),
            ),
            KeyValue::new(super::ATTR_REQUEST_MODEL, info.model.clone()),
        ];
        if let Some(host) = &info.sends_to {
            attributes.push(KeyValue::new(super::ATTR_SERVER_ADDRESS, host.clone()));
        }
        if let Some(u) = usage {
            for (kind, n) in [("input", u.prompt_tokens), ("output", u.completion_tokens)] {
                attributes.push(KeyValue::new(super::ATTR_TOKEN_TYPE, kind));
                instruments.tokens.record(u64::from(n), &attributes);
                attributes.pop();
            }
        }
        if let Some(kind) = error {
            attributes.push(KeyValue::new(super::ATTR_ERROR_TYPE, kind.to_string()));
        }
        instruments
            .operation
            .record(elapsed.as_secs_f64(), &attributes);
    }
    #[cfg(not(feature = "otel"))]
    let _ = (info, usage, elapsed, error);
}

/// One tool call that ran: how long, and whether it failed.
pub(crate) fn record_tool_duration(tool: &str, elapsed: Duration, failed: bool) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::KeyValue;
        let mut attributes = vec![
            KeyValue::new(super::ATTR_OPERATION_NAME, "execute_tool"),
            KeyValue::new(super::ATTR_TOOL_NAME, tool.to_string()),
        ];
        if failed {
            attributes.push(KeyValue::new(super::ATTR_ERROR_TYPE, "tool_error"));
        }
        on::instruments()
            .tool
            .record(elapsed.as_secs_f64(), &attributes);
    }
    #[cfg(not(feature = "otel"))]
    let _ = (tool, elapsed, failed);
}
