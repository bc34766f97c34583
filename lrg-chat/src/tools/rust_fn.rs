//! Tools that are plain async Rust functions, with an input schema derived
//! from the argument type by `schemars`.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use lrg_providers::{ToolAnnotations, ToolSpec};
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ToolOutput;
use super::validate::ArgumentCheck;

/// The arguments of a Rust tool that takes none:
/// `host.add_fn("now", "The time", read_only, |_: NoArgs| async { ... })`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, JsonSchema)]
pub struct NoArgs {}

type RunFn = dyn Fn(Value) -> BoxFuture<'static, ToolOutput> + Send + Sync;

/// One registered Rust function.
pub(crate) struct FnTool {
    pub(crate) spec: ToolSpec,
    pub(crate) check: ArgumentCheck,
    run: Arc<RunFn>,
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

/// The JSON Schema of `A` as MCP expects an input schema: draft 2020-12,
/// an object at the top, without the `$schema` and `title` noise.
pub(crate) fn input_schema_for<A: JsonSchema>() -> Result<Value, String> {
    let schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<A>();
    let mut value = schema.to_value();
    let Value::Object(map) = &mut value else {
        return Err("the argument type's schema is not an object".to_owned());
    };
    map.remove("$schema");
    map.remove("title");
    if map.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!(
            "tool arguments must be a struct (a JSON object); this type's schema has type {}",
            map.get("type")
                .map(Value::to_string)
                .unwrap_or_else(|| "unknown".to_owned())
        ));
    }
    Ok(value)
}

impl FnTool {
    pub(crate) fn new<A, F, Fut, O, E>(
        name: String,
        description: String,
        annotations: ToolAnnotations,
        f: F,
    ) -> Result<Self, String>
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        O: Into<ToolOutput>,
        E: Display,
    {
        let input_schema = input_schema_for::<A>()?;
        let check = ArgumentCheck::new(&name, &input_schema);
        let expected = check.expected().to_owned();
        let tool_name = name.clone();
        let f = Arc::new(f);
        let run: Arc<RunFn> = Arc::new(move |args: Value| {
            // Validation ran already; a failure here is a schema/serde mismatch
            // (e.g. a custom Deserialize), still reported to the model.
            let parsed: Result<A, _> = serde_json::from_value(args);
            match parsed {
                Err(e) => {
                    let msg = format!(
                        "Invalid arguments for tool `{tool_name}`: {e}\n{expected}\nCall the tool again with arguments that match."
                    );
                    async move { ToolOutput::error(msg) }.boxed()
                }
                Ok(args) => {
                    let fut = f(args);
                    async move {
                        match fut.await {
                            Ok(out) => out.into(),
                            Err(e) => ToolOutput::error(e.to_string()),
                        }
                    }
                    .boxed()
                }
            }
        });
        Ok(Self {
            spec: ToolSpec {
                name,
                description,
                input_schema,
                annotations,
                output_schema: None,
            },
            check,
            run,
        })
    }

    /// Run the function so that a panic or a hang becomes an error result
    /// (with a warning) instead of taking the session down.
    ///
    /// It runs in the caller's task, not a task of its own: handing it to
    /// another worker thread and waking the caller back cost most of a call
    /// (tens of µs, against about one for the rest). A panic is caught where
    /// it unwinds, a hang stops at the timeout (when the future is dropped).
    pub(crate) async fn call(&self, args: Value, timeout: Duration) -> ToolOutput {
        let name = self.spec.name.as_str();
        // The function is called (its synchronous part too) and its future
        // polled only in here, and both are dropped after a panic, so no
        // broken state of theirs can be observed afterwards.
        let run = std::panic::AssertUnwindSafe(async { (self.run)(args).await }).catch_unwind();
        match tokio::time::timeout(timeout, run).await {
            Ok(Ok(out)) => out,
            Ok(Err(payload)) => {
                let why = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned());
                let mut out = ToolOutput::error(format!(
                    "The tool `{name}` failed unexpectedly (it crashed)."
                ));
                out.warning = Some(format!("Rust tool `{name}` panicked: {why}"));
                out
            }
            Err(_) => {
                let secs = timeout.as_secs_f64();
                let mut out = ToolOutput::error(format!(
                    "The tool `{name}` did not finish within {secs} s and was stopped; the call has no result."
                ));
                out.warning = Some(format!("Rust tool `{name}` timed out after {secs} s"));
                out
            }
        }
    }
}
