//! The system prompt, built from named sections: [`PromptBuilder`].
//!
//! Each section is in only when its capability is on, in this order:
//!
//! 1. `base`: the app's or the person's own text (`--system`);
//! 2. `project`: project instructions, the `AGENTS.md` files from the
//!    working directory up to the repository root ([`ProjectDocs`]), one
//!    section per file, root first;
//! 3. `skills`: the index of the skills found ([`Skills`]), read with the
//!    `load_skill` tool;
//! 4. `memory`: the memory file ([`MemoryFile`]), edited with `remember`
//!    and `forget`;
//! 5. `sub_agents`: how to delegate, when `spawn_sub_agent` is offered.
//!
//! Two more are added after these by other parts, and shown only by
//! [`PromptBuilder::preview`] (the builder never adds them, so they are not
//! sent twice): `typed`, the answer schema in words that the session adds
//! for a typed message on a model that can only be asked that way, and
//! `tools`, the tool-use guidance a server's provider adds for a model that
//! gets tools as text (`--tool-format`). The preview gives them in the
//! order they end up in the request: the session appends `typed` to the
//! builder's text, and the provider appends `tools` last.
//!
//! A session built with [`ChatSessionBuilder::prompt`] rebuilds the prompt
//! at every model turn, so an edited `AGENTS.md`, a new skill or a fact
//! remembered by another chat applies from the next turn. Files are read
//! again only when their size or modification time changed.
//!
//! [`ChatSessionBuilder::prompt`]: crate::session::ChatSessionBuilder::prompt

mod cache;
mod context;
pub mod memory;
mod memory_tool;
pub mod project;
mod skill_tool;
pub mod skills;

use std::path::PathBuf;
use std::sync::Arc;

use lrg_providers::text_tools::{ToolMode, profile_for, tools_prompt};
use lrg_providers::typed::{OutputMode, OutputSchema};
use lrg_providers::{ModelInfo, ToolSpec};
use serde::Serialize;

pub use context::{PROJECT_SKILLS_DIR, PromptContext};
pub use memory::MemoryFile;
pub use memory_tool::{FORGET, REMEMBER, add_memory_tools};
pub use project::ProjectDocs;
pub use skill_tool::{LOAD_SKILL, add_load_skill};
pub use skills::{Skill, Skills};

use crate::tools::{AddToolError, ToolClass, ToolHost};

/// Which part of the prompt a section is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SectionName {
    /// The app's or person's own text.
    Base,
    /// One project instructions file.
    Project,
    /// The skills index.
    Skills,
    /// The memory file.
    Memory,
    /// Guidance on sub-agents.
    SubAgents,
    /// The answer schema in words (added by the session; previews only).
    Typed,
    /// Tool-use guidance for a text-format model (added by the provider;
    /// previews only).
    Tools,
}

impl SectionName {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SectionName::Base => "base",
            SectionName::Project => "project",
            SectionName::Skills => "skills",
            SectionName::Memory => "memory",
            SectionName::SubAgents => "sub_agents",
            SectionName::Typed => "typed",
            SectionName::Tools => "tools",
        }
    }
}

/// Who puts a section into the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AddedBy {
    /// The [`PromptBuilder`] (the session's prompt function).
    Builder,
    /// The session loop (typed-answer instructions).
    Session,
    /// The model's provider (tool-use guidance for text-format models).
    Provider,
}

/// One section of a built prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PromptSection {
    /// Which part it is.
    pub name: SectionName,
    /// Its text, as sent.
    pub text: String,
    /// The file it was read from, if any.
    pub source: Option<PathBuf>,
    /// Who adds it to the request.
    pub added_by: AddedBy,
}

impl PromptSection {
    /// A section the builder adds.
    pub(crate) fn new(name: SectionName, text: String, source: Option<PathBuf>) -> Self {
        Self {
            name,
            text,
            source,
            added_by: AddedBy::Builder,
        }
    }
}

/// A system prompt, section by section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BuiltPrompt {
    /// The sections, in the order they are sent.
    pub sections: Vec<PromptSection>,
}

impl BuiltPrompt {
    /// The whole prompt: the sections joined by blank lines.
    pub fn text(&self) -> String {
        self.sections
            .iter()
            .map(|s| s.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// The prompt, or `None` when it has no sections (no system prompt is
    /// sent at all).
    pub fn text_opt(&self) -> Option<String> {
        (!self.sections.is_empty()).then(|| self.text())
    }
}

/// One tool as a preview lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PreviewTool {
    /// Its name, as offered.
    pub name: String,
    /// Its description's first line.
    pub description: String,
    /// What it may do, which permissions decide on.
    pub class: ToolClass,
}

impl PreviewTool {
    /// `spec` as listed.
    pub fn of(spec: &ToolSpec) -> Self {
        Self {
            name: spec.name.clone(),
            description: spec
                .description
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned(),
            class: ToolClass::from_annotations(&spec.annotations),
        }
    }
}

/// What the next model turn would send: the system prompt section by
/// section, the tools offered, and the model (`provider:model`; `None`:
/// none chosen, shown as a model that takes tools natively would get it).
/// Its JSON is what `lrg prompt --json` prints and
/// `GET /v1/chat/sessions/{id}/prompt` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PromptPreview {
    /// The system prompt's sections, in the order they are sent.
    pub sections: Vec<PromptSection>,
    /// The tools offered.
    pub tools: Vec<PreviewTool>,
    /// The model.
    pub model: Option<String>,
}

impl PromptPreview {
    /// A preview of `prompt` with `tools` offered, on `model`.
    pub fn new(prompt: BuiltPrompt, tools: &[ToolSpec], model: Option<String>) -> Self {
        Self {
            sections: prompt.sections,
            tools: tools.iter().map(PreviewTool::of).collect(),
            model,
        }
    }
}

/// What the model is told when it can delegate to sub-agents. The tools'
/// own descriptions say how; this says when.
const SUB_AGENT_GUIDANCE: &str = "Sub-agents: with `spawn_sub_agent` you can hand \
    self-contained parts of a larger task to sub-agents that work in parallel, each with only \
    the prompt you give it. Use them for independent parts that take several tool calls; do \
    small things yourself. Their answers reach you later as `sub_agent_result`.";

/// How the skills index begins.
const SKILLS_HEADER: &str = "Skills: instructions for particular kinds of task. When a task \
    matches a skill's description, call `load_skill` with its name before you start, and read \
    the files its instructions name with `load_skill` and `file`.";

/// Assembles the system prompt from named sections (see the [module
/// docs](self)).
#[derive(Debug, Default)]
pub struct PromptBuilder {
    base: Option<String>,
    project: Option<ProjectDocs>,
    skills: Option<Arc<Skills>>,
    memory: Option<Arc<MemoryFile>>,
    tool_mode: ToolMode,
}

impl PromptBuilder {
    /// A builder with no sections on.
    pub fn new() -> Self {
        Self::default()
    }

    /// The app's or person's own text, first (blank text is left out).
    pub fn base(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        self.base = (!text.trim().is_empty()).then_some(text);
        self
    }

    /// Read project instructions as `docs` says.
    pub fn project(mut self, docs: ProjectDocs) -> Self {
        self.project = Some(docs);
        self
    }

    /// List these skills (offer `load_skill` with [`PromptBuilder::add_tools`]).
    pub fn skills(mut self, skills: Arc<Skills>) -> Self {
        self.skills = Some(skills);
        self
    }

    /// Include this memory file (offer `remember` and `forget` with
    /// [`PromptBuilder::add_tools`]).
    pub fn memory(mut self, memory: Arc<MemoryFile>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// How the model's server gets tools, for [`PromptBuilder::preview`]
    /// alone: with a text format the preview shows the guidance the provider
    /// adds. The provider is told separately (it adds the text itself).
    pub fn tool_mode(mut self, mode: ToolMode) -> Self {
        self.tool_mode = mode;
        self
    }

    /// Offer this builder's tools on `host`: `load_skill` when skills are on
    /// and at least one is found now (so a run without skills offers no
    /// extra tool), `remember` and `forget` when memory is on.
    pub fn add_tools(&self, host: &ToolHost) -> Result<(), AddToolError> {
        if let Some(skills) = &self.skills
            && !skills.list().is_empty()
        {
            add_load_skill(host, skills.clone())?;
        }
        if let Some(memory) = &self.memory {
            add_memory_tools(host, memory.clone())?;
        }
        Ok(())
    }

    /// The sections this builder sends for a turn of `info`'s model that
    /// offers `tools`.
    pub fn build(&self, _info: &ModelInfo, tools: &[ToolSpec]) -> BuiltPrompt {
        let mut sections = Vec::new();
        if let Some(base) = &self.base {
            sections.push(PromptSection::new(SectionName::Base, base.clone(), None));
        }
        if let Some(project) = &self.project {
            for doc in project.load() {
                sections.push(PromptSection::new(
                    SectionName::Project,
                    doc.text,
                    Some(doc.path),
                ));
            }
        }
        // Listed only when the model can load them.
        if let Some(skills) = &self.skills
            && tools.iter().any(|t| t.name == LOAD_SKILL)
        {
            let found = skills.list();
            if !found.is_empty() {
                let mut text = format!("{SKILLS_HEADER}\n");
                for skill in &found {
                    text.push_str(&format!("\n- {}: {}", skill.name, skill.description));
                }
                sections.push(PromptSection::new(SectionName::Skills, text, None));
            }
        }
        if let Some(memory) = &self.memory {
            sections.push(PromptSection::new(
                SectionName::Memory,
                memory.section_text(),
                Some(memory.path().to_path_buf()),
            ));
        }
        // Sub-agents are on exactly when their tool is offered (a sub-agent,
        // which shares this prompt, is not offered it).
        if tools
            .iter()
            .any(|t| t.name == crate::sub_agents::tools::SPAWN_SUB_AGENT)
        {
            sections.push(PromptSection::new(
                SectionName::SubAgents,
                SUB_AGENT_GUIDANCE.to_owned(),
                None,
            ));
        }
        BuiltPrompt { sections }
    }

    /// What a turn sends in all, for showing: [`PromptBuilder::build`]'s
    /// sections, then the `typed` section when `output` is asked of a model
    /// that takes it in words, then the `tools` section when the tool mode
    /// has the provider describe `tools` as text.
    pub fn preview(
        &self,
        info: &ModelInfo,
        tools: &[ToolSpec],
        output: Option<&OutputSchema>,
    ) -> BuiltPrompt {
        let mut built = self.build(info, tools);
        built
            .sections
            .extend(added_elsewhere(info, tools, output, self.tool_mode));
        built
    }
}

/// The sections the session and the provider add after the prompt
/// function's text: `typed` for `output` on a model asked in words, `tools`
/// for a text-format model under `mode`.
pub(crate) fn added_elsewhere(
    info: &ModelInfo,
    tools: &[ToolSpec],
    output: Option<&OutputSchema>,
    mode: ToolMode,
) -> Vec<PromptSection> {
    let mut sections = Vec::new();
    if let Some(schema) = output
        && info.output_mode == OutputMode::Prompted
    {
        sections.push(PromptSection {
            added_by: AddedBy::Session,
            ..PromptSection::new(SectionName::Typed, schema.instructions(), None)
        });
    }
    if let Some(text) = text_tools_prompt(mode, &info.model, tools) {
        sections.push(PromptSection {
            added_by: AddedBy::Provider,
            ..PromptSection::new(SectionName::Tools, text, None)
        });
    }
    sections
}

/// The guidance a provider under `mode` adds for `model` offered `tools`:
/// as [`lrg_providers::text_tools::TextTurn`] decides it.
fn text_tools_prompt(mode: ToolMode, model: &str, tools: &[ToolSpec]) -> Option<String> {
    if tools.is_empty() {
        return None;
    }
    let format = match mode {
        ToolMode::Text(format) => format,
        ToolMode::Auto => {
            let profile = profile_for(model);
            if profile.server_parses_tools {
                return None;
            }
            profile.tool_format
        }
        _ => return None,
    };
    Some(tools_prompt(format, tools))
}
