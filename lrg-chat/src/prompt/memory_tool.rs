//! `remember {fact}` and `forget {fact}`: the change-class tools that edit
//! a memory file. Being change-class (not read-only, not destructive), they
//! ask under the default permission mode.

use std::sync::Arc;

use lrg_providers::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;

use super::memory::MemoryFile;
use crate::tools::{AddToolError, ToolHost};

/// The name of the tool that adds a fact.
pub const REMEMBER: &str = "remember";
/// The name of the tool that removes one.
pub const FORGET: &str = "forget";

#[derive(Debug, Deserialize, JsonSchema)]
struct Remember {
    /// The fact to keep, in one short sentence.
    fact: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Forget {
    /// The fact to remove, as it is written in the memory.
    fact: String,
}

/// Offer `remember` and `forget` on `host`, editing `memory`.
pub fn add_memory_tools(host: &ToolHost, memory: Arc<MemoryFile>) -> Result<(), AddToolError> {
    let change = ToolAnnotations {
        read_only_hint: Some(false),
        destructive_hint: Some(false),
        ..Default::default()
    };
    let kept = memory.clone();
    host.add_fn(
        REMEMBER,
        "Keep a fact in the memory shared across chats (it appears in the system prompt of \
         later chats): a lasting preference or something the person asked you to remember.",
        change.clone(),
        move |args: Remember| {
            let memory = kept.clone();
            blocking(move || memory.remember(&args.fact))
        },
    )?;
    host.add_fn(
        FORGET,
        "Remove a fact from the memory, as it is written there.",
        change,
        move |args: Forget| {
            let memory = memory.clone();
            blocking(move || memory.forget(&args.fact))
        },
    )
}

/// Run `edit` on a blocking thread: it waits for the file's lock and
/// writes the file, which a runtime worker should not wait on.
async fn blocking(
    edit: impl FnOnce() -> Result<String, String> + Send + 'static,
) -> Result<String, String> {
    tokio::task::spawn_blocking(edit)
        .await
        .unwrap_or_else(|e| Err(format!("The memory could not be changed: {e}")))
}
