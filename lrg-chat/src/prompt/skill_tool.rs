//! `load_skill {name, file?}`: the read-class tool that gives the model a
//! skill's instructions, or one file of its folder.

use std::sync::Arc;

use lrg_providers::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;

use super::skills::Skills;
use crate::tools::{AddToolError, ToolHost};

/// The tool's name.
pub const LOAD_SKILL: &str = "load_skill";

#[derive(Debug, Deserialize, JsonSchema)]
struct LoadSkill {
    /// The skill's name, as listed in the system prompt.
    name: String,
    /// A file of the skill's folder that its instructions name, as a path
    /// relative to that folder (e.g. `reference/forms.md`); leave out for
    /// the instructions themselves.
    #[serde(default)]
    file: Option<String>,
}

/// Offer `load_skill` on `host`, reading from `skills`.
pub fn add_load_skill(host: &ToolHost, skills: Arc<Skills>) -> Result<(), AddToolError> {
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    host.add_fn(
        LOAD_SKILL,
        "Read a skill listed in the system prompt: its instructions, or with `file` one of the \
         files in its folder that the instructions name. Load a skill before doing a task it \
         covers.",
        read_only,
        move |args: LoadSkill| {
            let skills = skills.clone();
            async move {
                // Small files on a local disk: read here rather than hand
                // off to a blocking thread.
                skills.load(&args.name, args.file.as_deref())
            }
        },
    )
}
