//! The one HTTP transport every adapter shares: send a request, map a non-2xx
//! answer to a [`ProviderError`], and drive a [`Decoder`] over the streamed
//! body with idle timeout and cancellation.

use std::pin::Pin;
use std::time::Duration;

use futures::StreamExt as _;
use reqwest::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use crate::overflow;
use crate::text::truncate;
use crate::wire::{Decoder, Frame, Framer, Framing};
use crate::{ApiKey, ProviderError, StopReason, TurnEvent, TurnStream};

/// Timeouts and connection pool of the shared transport.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportConfig {
    /// Time allowed to open the connection.
    pub connect_timeout: Duration,
    /// Longest wait for an answer to begin: from sending the request to
    /// its first piece (text, reasoning, a call, usage: keep-alive comments
    /// and empty deltas do not count), for a model that hangs before it
    /// says anything. `None` (the default): the same as `idle_timeout`.
    pub first_byte_timeout: Option<Duration>,
    /// Longest silence allowed between two pieces of a streamed answer,
    /// once it began; bytes that decode to nothing (keep-alive comments,
    /// empty deltas) are silence too. Default [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// Most idle keep-alive connections kept per host. A connection that
    /// finishes an answer while this many wait already is closed: each one
    /// kept holds its read buffer (up to a few hundred KiB after a long
    /// streamed answer), so an app that ran 1,000 chats at once keeps this
    /// many, not 1,000. Raise it when that many chats stream at once
    /// steadily, so that their turns do not reconnect.
    pub pool_max_idle_per_host: usize,
    /// How long an idle pooled connection is kept; `None` keeps it until
    /// the server closes it.
    pub pool_idle_timeout: Option<Duration>,
}

/// Default [`TransportConfig::idle_timeout`], and so of the first-byte
/// timeout: 60 s. A model that hangs fails its attempt after a minute, and
/// the session's retry deadline ([`crate::RetryPolicy::deadline`]) bounds
/// the retries.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Idle connections kept per host by default.
pub const DEFAULT_POOL_MAX_IDLE_PER_HOST: usize = 32;
/// How long an idle connection is kept by default: long enough for a person
/// to write the next message without a new TLS handshake.
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

impl Default for TransportConfig {
    fn default() -> Self {
        Self::new(Duration::from_secs(10), DEFAULT_IDLE_TIMEOUT)
    }
}

impl TransportConfig {
    /// Timeouts: `connect` to open the connection, `idle` both before an
    /// answer begins and between two of its chunks (see
    /// [`TransportConfig::with_first_byte_timeout`]); the default pool.
    pub fn new(connect: Duration, idle: Duration) -> Self {
        Self {
            connect_timeout: connect,
            first_byte_timeout: None,
            idle_timeout: idle,
            pool_max_idle_per_host: DEFAULT_POOL_MAX_IDLE_PER_HOST,
            pool_idle_timeout: Some(DEFAULT_POOL_IDLE_TIMEOUT),
        }
    }

    /// With at most `timeout` from the request to the answer's first chunk.
    pub fn with_first_byte_timeout(mut self, timeout: Duration) -> Self {
        self.first_byte_timeout = Some(timeout);
        self
    }

    /// With at most `timeout` of silence between two chunks of an answer.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// With at most `max` idle connections kept per host.
    pub fn with_pool_max_idle_per_host(mut self, max: usize) -> Self {
        self.pool_max_idle_per_host = max;
        self
    }

    /// With idle connections closed after `timeout` (`None`: kept until
    /// the server closes them).
    pub fn with_pool_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.pool_idle_timeout = timeout;
        self
    }
}

/// A shared HTTP client plus its timeouts. Cheap to clone.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
    config: TransportConfig,
}

/// Longest error body kept in a message.
const MAX_ERROR_BODY: usize = 4_000;

/// Make rustls's `ring` provider the process default, unless one is installed
/// already (an embedding app's own choice wins). lrg's HTTP clients are built
/// without a provider compiled in, so that the default build needs no cmake;
/// every place that builds one (this transport, the MCP HTTP client) calls this
/// first. Cheap after the first call.
pub fn ensure_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Err only when another thread installed one first: theirs stays.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

impl HttpTransport {
    /// A transport with the given timeouts.
    pub fn new(config: TransportConfig) -> Result<Self, ProviderError> {
        ensure_tls_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            .pool_idle_timeout(config.pool_idle_timeout)
            .build()
            .map_err(|e| ProviderError::Config {
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Self { client, config })
    }

    /// The underlying client, for building requests.
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The timeouts and pool settings in use.
    pub fn config(&self) -> &TransportConfig {
        &self.config
    }

    /// Send `request` and stream its answer through `decoder`.
    ///
    /// `key` is only used to scrub error text, in case a server echoes it.
    pub(crate) fn stream(
        &self,
        request: reqwest::RequestBuilder,
        framing: Framing,
        mut decoder: Box<dyn Decoder>,
        key: Option<ApiKey>,
        cancel: CancellationToken,
    ) -> TurnStream {
        let idle = self.config.idle_timeout;
        let first_byte = self.config.first_byte_timeout.unwrap_or(idle);
        Box::pin(async_stream::stream! {
            // One cancellation future and one timer for the whole answer,
            // polled again for each chunk: creating them per chunk cost a
            // registration with the token and the timer wheel every time.
            // Cancellation is looked at first, so a stop ends the answer at
            // once even while chunks keep coming.
            let cancelled = cancel.cancelled();
            tokio::pin!(cancelled);
            // Until the first chunk of the body, the first-byte timeout;
            // from then on, the idle timeout between chunks.
            let mut silence = Silence::new(first_byte);
            let mut begun = false;
            // Read while the stream is polled, inside the caller's span (the
            // model turn's), so a traced server joins the same trace.
            let request = crate::traceparent::inject(request);
            let response = tokio::select! {
                biased;
                _ = &mut cancelled => {
                    yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                    return;
                }
                r = request.send() => Some(r),
                () = silence.expired() => None,
            };
            let response = match response {
                None => {
                    yield Err(first_byte_error(first_byte));
                    return;
                }
                Some(Err(e)) => {
                    yield Err(send_error(&e, key.as_ref()));
                    return;
                }
                Some(Ok(r)) => r,
            };
            let status = response.status();
            if !status.is_success() {
                let headers = response.headers().clone();
                let body = tokio::select! {
                    biased;
                    _ = &mut cancelled => String::new(),
                    b = response.text() => b.unwrap_or_default(),
                    () = silence.expired() => String::new(),
                };
                yield Err(status_error(status.as_u16(), &headers, &body, key.as_ref()));
                return;
            }
            let mut body = response.bytes_stream();
            let mut framer = Framer::new(framing);
            let mut frames: Vec<Frame> = Vec::new();
            let mut events: Vec<TurnEvent> = Vec::new();
            loop {
                let chunk = tokio::select! {
                    biased;
                    _ = &mut cancelled => {
                        yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                        return;
                    }
                    // A chunk already there is taken before the timer is
                    // looked at: silence is only what the server kept.
                    c = body.next() => c,
                    () = silence.expired() => {
                        yield Err(if begun {
                            ProviderError::transient(format!(
                                "the answer went silent: nothing of it for {} (the idle timeout; \
                                 keep-alives and empty deltas do not count); \
                                 giving up on this answer", secs(idle)
                            ))
                        } else {
                            first_byte_error(first_byte)
                        });
                        return;
                    }
                };
                let chunk = match chunk {
                    None => None,
                    Some(Err(e)) => {
                        yield Err(ProviderError::transient(format!(
                            "the stream was cut: {}", scrub(&e.to_string(), key.as_ref())
                        )));
                        return;
                    }
                    Some(Ok(bytes)) => Some(bytes),
                };
                match &chunk {
                    Some(bytes) => framer.push(bytes, &mut frames),
                    None => framer.finish(&mut frames),
                }
                for frame in frames.drain(..) {
                    if let Err(e) = decoder.decode(&frame, &mut events) {
                        // What was decoded before the bad frame still arrived.
                        for event in events.drain(..) {
                            yield Ok(event);
                        }
                        yield Err(e);
                        return;
                    }
                }
                if chunk.is_none()
                    && let Err(e) = decoder.finish(&mut events)
                {
                    for event in events.drain(..) {
                        yield Ok(event);
                    }
                    yield Err(e);
                    return;
                }
                // Silence is counted between pieces of the answer, not bytes:
                // a server that only sends keep-alive comments or empty
                // deltas is as stalled as one that sends nothing, and must
                // not hold a turn (or a CI job) open forever.
                if events.iter().any(is_progress) {
                    if begun {
                        silence.heard();
                    } else {
                        begun = true;
                        silence.set_limit(idle);
                    }
                }
                for event in events.drain(..) {
                    yield Ok(event);
                }
                if chunk.is_none() {
                    return;
                }
            }
        })
    }

    /// Send a request and read a whole JSON answer (model lists and the like).
    pub(crate) async fn get_json(
        &self,
        request: reqwest::RequestBuilder,
        key: Option<&ApiKey>,
    ) -> Result<serde_json::Value, ProviderError> {
        let request = crate::traceparent::inject(request);
        let response = tokio::time::timeout(self.config.idle_timeout, request.send())
            .await
            .map_err(|_| ProviderError::transient("no answer from the server in time"))?
            .map_err(|e| send_error(&e, key))?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.text().await.map_err(|e| {
            ProviderError::transient(format!(
                "reading the answer failed: {}",
                scrub(&e.to_string(), key)
            ))
        })?;
        if !status.is_success() {
            return Err(status_error(status.as_u16(), &headers, &body, key));
        }
        serde_json::from_str(&body).map_err(|e| ProviderError::Protocol {
            message: format!(
                "the server's answer is not JSON ({e}): {}",
                truncate(&scrub(&body, key), 300)
            ),
        })
    }

    /// Whether anything answers HTTP at `url` (any status counts as reachable).
    pub async fn reachable(&self, url: &str) -> bool {
        let request = self.client.get(url).timeout(self.config.connect_timeout);
        request.send().await.is_ok()
    }
}

/// The stall timeout of one answer: a single timer per answer, moved only
/// when it fires before the silence is over. A chunk just notes the time,
/// so a fast stream costs no timer work per chunk.
/// Whether `event` is a piece of the answer: anything but an empty text,
/// reasoning or call-argument delta.
fn is_progress(event: &TurnEvent) -> bool {
    match event {
        TurnEvent::TextDelta { text } | TurnEvent::ReasoningDelta { text } => !text.is_empty(),
        TurnEvent::ToolCallDelta {
            id,
            name,
            arguments_fragment,
            ..
        } => id.is_some() || name.is_some() || !arguments_fragment.is_empty(),
        _ => true,
    }
}

struct Silence {
    idle: Duration,
    last: tokio::time::Instant,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Silence {
    fn new(idle: Duration) -> Self {
        let last = tokio::time::Instant::now();
        Self {
            idle,
            last,
            timer: Box::pin(tokio::time::sleep_until(last + idle)),
        }
    }

    /// From now on, allow `idle` of silence (counted from now). The timer
    /// is moved too: it may be set for a longer limit than the new one.
    fn set_limit(&mut self, idle: Duration) {
        self.idle = idle;
        self.last = tokio::time::Instant::now();
        self.timer.as_mut().reset(self.last + idle);
    }

    /// Something arrived: the silence starts again.
    fn heard(&mut self) {
        self.last = tokio::time::Instant::now();
    }

    /// Resolves once `idle` has passed since the last [`Silence::heard`].
    async fn expired(&mut self) {
        loop {
            self.timer.as_mut().await;
            let due = self.last + self.idle;
            if tokio::time::Instant::now() >= due {
                return;
            }
            self.timer.as_mut().reset(due);
        }
    }
}

/// `d` for a message: `60 s`, `0.5 s`.
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{s:.1} s")
    }
}

/// The answer did not begin within the first-byte timeout.
fn first_byte_error(limit: Duration) -> ProviderError {
    ProviderError::transient(format!(
        "the model did not begin its answer within {} (the first-byte timeout)",
        secs(limit)
    ))
}

fn scrub(text: &str, key: Option<&ApiKey>) -> String {
    match key {
        Some(k) => k.scrub(text),
        None => text.to_string(),
    }
}

/// Map a failure to send (connect, reset, DNS, TLS) to an error.
pub(crate) fn send_error(e: &reqwest::Error, key: Option<&ApiKey>) -> ProviderError {
    let url = e
        .url()
        .map(|u| format!(" {}{}", u.host_str().unwrap_or(""), port_suffix(u)))
        .unwrap_or_default();
    let what = scrub(&e.without_url_string(), key);
    if e.is_builder() {
        return ProviderError::Config {
            message: format!("invalid request: {what}"),
        };
    }
    ProviderError::transient(format!("cannot reach{url}: {what}"))
}

trait WithoutUrl {
    fn without_url_string(&self) -> String;
}

impl WithoutUrl for reqwest::Error {
    // URLs can carry keys in their query (Gemini's `?key=`): never print them.
    fn without_url_string(&self) -> String {
        let mut chain = Vec::new();
        let mut source: Option<&dyn std::error::Error> = std::error::Error::source(self);
        while let Some(s) = source {
            chain.push(s.to_string());
            source = s.source();
        }
        let head = if self.is_connect() {
            "connection failed"
        } else if self.is_timeout() {
            "timed out"
        } else if self.is_request() {
            "request failed"
        } else {
            "HTTP error"
        };
        if chain.is_empty() {
            head.to_string()
        } else {
            format!("{head}: {}", chain.join(": "))
        }
    }
}

fn port_suffix(u: &reqwest::Url) -> String {
    u.port().map(|p| format!(":{p}")).unwrap_or_default()
}

/// Map a non-2xx answer to an error, with the server's message and retry hint.
pub(crate) fn status_error(
    status: u16,
    headers: &HeaderMap,
    body: &str,
    key: Option<&ApiKey>,
) -> ProviderError {
    let body = scrub(body, key);
    let detail = error_detail(&body);
    let message = format!("HTTP {status}: {}", truncate(&detail, MAX_ERROR_BODY));
    let lower = detail.to_ascii_lowercase();
    let json = serde_json::from_str::<serde_json::Value>(&body).ok();
    let code = json.as_ref().and_then(overflow::error_code);
    // A rate limit or a server fault is never an overflow, whatever words
    // its message uses (unless its code says so).
    let retryable = matches!(status, 408 | 409 | 425 | 429 | 500..=599);
    let overflow = if retryable {
        code.is_some_and(|c| overflow::is_context_overflow(Some(c), ""))
    } else {
        overflow::is_context_overflow(code, &detail)
    };
    if overflow {
        return ProviderError::ContextOverflow { message };
    }
    match status {
        401 | 403 => ProviderError::Auth {
            message: format!("{message} (check the API key)"),
        },
        404 => ProviderError::ModelNotFound { message },
        408 | 409 | 425 | 429 | 500..=599 => ProviderError::Transient {
            message,
            retry_after: retry_after(headers, &body),
        },
        400 | 413 | 422
            if lower.contains("model")
                && (lower.contains("not found") || lower.contains("does not exist")) =>
        {
            ProviderError::ModelNotFound { message }
        }
        _ => ProviderError::BadRequest { message },
    }
}

/// The human part of an error body: `error.message` when it is JSON.
fn error_detail(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return body.trim().to_string();
    };
    let message = v
        .pointer("/error/message")
        .or_else(|| v.pointer("/error"))
        .or_else(|| v.pointer("/message"))
        .or_else(|| v.pointer("/detail"));
    match message {
        Some(serde_json::Value::String(s)) => s.clone(),
        _ => body.trim().to_string(),
    }
}

/// Retry hint from `retry-after-ms`, `Retry-After` (seconds) or Gemini's
/// `retryDelay` in the error body.
pub(crate) fn retry_after(headers: &HeaderMap, body: &str) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_millis(ms as u64));
    }
    if let Some(s) = header("retry-after").and_then(|v| v.parse::<f64>().ok())
        && s.is_finite()
        && s >= 0.0
    {
        return Some(Duration::from_secs_f64(s.min(86_400.0)));
    }
    gemini_retry_delay(body)
}

fn gemini_retry_delay(body: &str) -> Option<Duration> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let details = v.pointer("/error/details")?.as_array()?;
    details.iter().find_map(|d| {
        let s = d.get("retryDelay")?.as_str()?;
        let secs: f64 = s.strip_suffix('s')?.parse().ok()?;
        (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn classifies_statuses() {
        let h = HeaderMap::new();
        assert!(matches!(
            status_error(401, &h, "{\"error\":{\"message\":\"bad key\"}}", None),
            ProviderError::Auth { .. }
        ));
        assert!(status_error(503, &h, "overloaded", None).is_transient());
        assert!(matches!(
            status_error(
                400,
                &h,
                "{\"error\":{\"message\":\"This model's maximum context length is 8192 tokens\"}}",
                None
            ),
            ProviderError::ContextOverflow { .. }
        ));
        assert!(matches!(
            status_error(404, &h, "nope", None),
            ProviderError::ModelNotFound { .. }
        ));
        assert!(matches!(
            status_error(400, &h, "bad", None),
            ProviderError::BadRequest { .. }
        ));
    }

    #[test]
    fn retry_hints() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h, ""), Some(Duration::from_secs(7)));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h, ""), Some(Duration::from_millis(250)));
        let body = r#"{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}"#;
        assert_eq!(
            retry_after(&HeaderMap::new(), body),
            Some(Duration::from_secs(3))
        );
        assert!(
            status_error(429, &HeaderMap::new(), body, None)
                .retry_after()
                .is_some()
        );
    }

    #[tokio::test]
    async fn silence_is_counted_from_the_last_chunk() {
        let idle = Duration::from_millis(300);
        let mut silence = Silence::new(idle);
        // A chunk after 200 ms: the timer set for 300 ms after the start
        // fires first and must not end the wait.
        tokio::time::sleep(Duration::from_millis(200)).await;
        silence.heard();
        silence.expired().await;
        assert!(tokio::time::Instant::now() >= silence.last + idle);
        // Expired stays expired until something arrives.
        silence.expired().await;
    }

    #[test]
    fn pool_defaults_are_bounded() {
        let config = TransportConfig::default();
        assert_eq!(
            config.pool_max_idle_per_host,
            DEFAULT_POOL_MAX_IDLE_PER_HOST
        );
        assert_eq!(config.pool_idle_timeout, Some(DEFAULT_POOL_IDLE_TIMEOUT));
        let config = config
            .with_pool_max_idle_per_host(1_000)
            .with_pool_idle_timeout(None);
        assert_eq!(config.pool_max_idle_per_host, 1_000);
        assert_eq!(config.pool_idle_timeout, None);
        assert!(HttpTransport::new(config).is_ok());
    }

    #[test]
    fn key_is_scrubbed() {
        let key = ApiKey::new("sk-abcdef123456");
        let e = status_error(
            401,
            &HeaderMap::new(),
            "invalid key sk-abcdef123456",
            Some(&key),
        );
        assert!(!e.to_string().contains("sk-abcdef123456"), "{e}");
    }
}
