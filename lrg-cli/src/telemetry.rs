//! Logs and OpenTelemetry: the one place the process's subscriber is made.
//!
//! Logs go to stderr as `RUST_LOG` says (see [`init`]). Traces and metrics
//! are exported over OTLP/HTTP (protobuf) when the standard variables ask
//! for it: `OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! (and `…_METRICS_ENDPOINT`) per signal, with `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_SERVICE_NAME` (default `lrg`), `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_METRIC_EXPORT_INTERVAL` and `OTEL_SDK_DISABLED`. Unset, nothing is
//! exported and no span is even recorded.
//!
//! A collector never decides how a run ends: spans wait in a bounded queue
//! (`OTEL_BSP_MAX_QUEUE_SIZE`, 2,048 by default; more are dropped) and are
//! sent from the exporter's own thread; a failed export prints one warning
//! for the whole run; at exit ([`shutdown`], also before a Ctrl-C exit)
//! what is queued gets at most [`FLUSH_LIMIT`], then the process leaves
//! whatever is still in flight.

/// The most time exit waits for the last spans and metrics to go out.
#[cfg(feature = "otel")]
pub const FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_millis(900);

/// Install the process's subscriber: logs to stderr as `RUST_LOG` says,
/// else off — except under `serve` (`server`), whose stderr is a server's
/// log: there warnings and errors (a damaged session file, a model that
/// could not be loaded, with the detail a remote caller is not told) are
/// written unless `RUST_LOG` says otherwise. Plus the OpenTelemetry layer
/// when the environment asks for export.
pub fn init(server: bool) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let default = if server {
        "error,lrg=warn,lrg_chat=warn,lrg_providers=warn,lrg_llama=warn,lrg_mlx=warn"
    } else {
        "off"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // A filter of the log layer alone: the spans exported need no log level.
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(logs);
    #[cfg(feature = "otel")]
    let registry = registry.with(export::start());
    let _ = registry.try_init();
}

/// Send what is left and stop exporting, within [`FLUSH_LIMIT`]. Called
/// once at exit; later calls do nothing.
pub fn shutdown() {
    #[cfg(feature = "otel")]
    export::shutdown();
}

#[cfg(feature = "otel")]
mod export {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Mutex, OnceLock};
    use std::time::Duration;

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig as _;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::metrics::SdkMeterProvider;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    /// What is flushed at exit: the tracer provider, the meter provider.
    type Providers = (SdkTracerProvider, Option<SdkMeterProvider>);

    /// The providers, until [`shutdown`] takes them.
    static PROVIDERS: OnceLock<Mutex<Option<Providers>>> = OnceLock::new();
    /// Whether the export warning was printed.
    static WARNED: AtomicBool = AtomicBool::new(false);

    fn env(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }

    /// The OpenTelemetry layer, when the environment asks for export.
    pub(super) fn start<S>() -> Option<impl tracing_subscriber::Layer<S>>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return None;
        }
        let general = env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
        let traces = general || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
        let metrics = general || env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").is_some();
        if !traces && !metrics {
            return None;
        }
        // The exporters' HTTP client is built without a TLS provider of its own.
        lrg_providers::transport::ensure_tls_provider();
        let resource = resource();
        let tracer_provider = if traces {
            match span_exporter() {
                Ok(exporter) => Some(
                    SdkTracerProvider::builder()
                        .with_batch_exporter(Warned(exporter))
                        .with_resource(resource.clone())
                        .build(),
                ),
                Err(e) => {
                    eprintln!("lrg: traces are not exported: {e}");
                    None
                }
            }
        } else {
            None
        };
        let meter_provider = if metrics {
            match metric_exporter() {
                Ok(exporter) => {
                    // The reader reads OTEL_METRIC_EXPORT_INTERVAL itself.
                    let provider = SdkMeterProvider::builder()
                        .with_periodic_exporter(Warned(exporter))
                        .with_resource(resource)
                        .build();
                    opentelemetry::global::set_meter_provider(provider.clone());
                    Some(provider)
                }
                Err(e) => {
                    eprintln!("lrg: metrics are not exported: {e}");
                    None
                }
            }
        } else {
            None
        };
        let tracer_provider = match (tracer_provider, meter_provider) {
            (Some(t), m) => {
                let keep = (t.clone(), m);
                let _ = PROVIDERS.set(Mutex::new(Some(keep)));
                t
            }
            (None, Some(m)) => {
                // Metrics alone: a provider with no exporter keeps the
                // shutdown path one.
                let t = SdkTracerProvider::builder().build();
                let _ = PROVIDERS.set(Mutex::new(Some((t, Some(m)))));
                return None;
            }
            (None, None) => return None,
        };
        Some(lrg_chat::otel::layer(tracer_provider.tracer("lrg")))
    }

    /// `service.name` defaults to `lrg`; the environment's wins.
    fn resource() -> Resource {
        let named = env("OTEL_SERVICE_NAME").is_some()
            || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|v| {
                v.split(',')
                    .any(|kv| kv.trim_start().starts_with("service.name="))
            });
        let builder = Resource::builder();
        if named {
            builder.build()
        } else {
            builder.with_service_name("lrg").build()
        }
    }

    fn span_exporter() -> Result<opentelemetry_otlp::SpanExporter, String> {
        opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build()
            .map_err(|e| e.to_string())
    }

    fn metric_exporter() -> Result<opentelemetry_otlp::MetricExporter, String> {
        opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build()
            .map_err(|e| e.to_string())
    }

    /// Say once that the collector cannot be reached; the run goes on.
    fn warn_once(what: &str, error: &dyn std::fmt::Display) {
        if !WARNED.swap(true, Ordering::SeqCst) {
            eprintln!(
                "lrg: warning: cannot export {what} to the OTLP collector ({error}); \
                 the run goes on without them (said once)"
            );
        }
    }

    /// An exporter that warns (once per process) when an export fails.
    #[derive(Debug)]
    struct Warned<E>(E);

    impl<E: opentelemetry_sdk::trace::SpanExporter> opentelemetry_sdk::trace::SpanExporter
        for Warned<E>
    {
        async fn export(&self, batch: Vec<opentelemetry_sdk::trace::SpanData>) -> OTelSdkResult {
            let result = self.0.export(batch).await;
            if let Err(e) = &result {
                warn_once("spans", e);
            }
            result
        }

        fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
            self.0.shutdown_with_timeout(timeout)
        }

        fn force_flush(&self) -> OTelSdkResult {
            self.0.force_flush()
        }

        fn set_resource(&mut self, resource: &Resource) {
            self.0.set_resource(resource);
        }
    }

    impl<E: opentelemetry_sdk::metrics::exporter::PushMetricExporter>
        opentelemetry_sdk::metrics::exporter::PushMetricExporter for Warned<E>
    {
        async fn export(
            &self,
            metrics: &opentelemetry_sdk::metrics::data::ResourceMetrics,
        ) -> OTelSdkResult {
            let result = self.0.export(metrics).await;
            if let Err(e) = &result {
                warn_once("metrics", e);
            }
            result
        }

        fn force_flush(&self) -> OTelSdkResult {
            self.0.force_flush()
        }

        fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
            self.0.shutdown_with_timeout(timeout)
        }

        fn temporality(&self) -> opentelemetry_sdk::metrics::Temporality {
            self.0.temporality()
        }
    }

    /// Flush and stop on a thread of its own, waited for at most
    /// [`super::FLUSH_LIMIT`]: a collector that does not answer keeps
    /// that thread, not the process.
    pub(super) fn shutdown() {
        let Some(providers) = PROVIDERS
            .get()
            .and_then(|m| m.lock().ok().and_then(|mut p| p.take()))
        else {
            return;
        };
        let (done, wait) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("lrg-otel-flush".into())
            .spawn(move || {
                let (tracer, meter) = providers;
                // An export cut off by the limit reports no error of its
                // own: the person is told here instead (still once).
                if let Err(e) = tracer.shutdown_with_timeout(super::FLUSH_LIMIT) {
                    warn_once("spans", &e);
                }
                if let Some(meter) = meter
                    && let Err(e) = meter.shutdown_with_timeout(super::FLUSH_LIMIT)
                {
                    warn_once("metrics", &e);
                }
                let _ = done.send(());
            });
        if spawned.is_ok() && wait.recv_timeout(super::FLUSH_LIMIT).is_err() {
            warn_once(
                "spans",
                &format!(
                    "it did not take them within {} s",
                    super::FLUSH_LIMIT.as_secs_f64()
                ),
            );
        }
    }
}
