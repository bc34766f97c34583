//! [`PromptContext`]: where a chat's prompt sections come from, as an app
//! configures them once for many chats (a served chat, an editor's session,
//! a command line run): the project folder, skill folders, a memory file.

use std::path::PathBuf;
use std::sync::Arc;

use lrg_providers::text_tools::ToolMode;

use super::{MemoryFile, ProjectDocs, PromptBuilder, Skills};

/// The folder of a project's own skills, inside its root.
pub const PROJECT_SKILLS_DIR: &str = ".lrg/skills";

/// Where a chat's prompt sections come from. Each field left empty leaves
/// its section out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptContext {
    /// The working directory whose project instructions are read (from it
    /// up to its repository root), and whose repository's
    /// [`PROJECT_SKILLS_DIR`] is searched for skills; `None`: no project.
    pub project_dir: Option<PathBuf>,
    /// The project instruction file names (default `["AGENTS.md"]`).
    pub project_doc_names: Option<Vec<String>>,
    /// The byte cap of the project instructions (default 32 KiB).
    pub project_doc_max_bytes: Option<usize>,
    /// Skill folders named by the person, searched first.
    pub skill_dirs: Vec<PathBuf>,
    /// The person's own skill folder (lrg's config dir `skills/`), searched
    /// after the project's.
    pub user_skill_dir: Option<PathBuf>,
    /// The memory file (`remember` and `forget`); `None`: no memory.
    pub memory: Option<PathBuf>,
    /// How the model's server gets tools, for previews (see
    /// [`PromptBuilder::tool_mode`]).
    pub tool_mode: ToolMode,
}

impl PromptContext {
    /// No sections but what [`PromptContext::builder`] is given.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read the project instructions of `dir`.
    pub fn project_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.project_dir = Some(dir.into());
        self
    }

    /// Search these skill folders first.
    pub fn skill_dirs(mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        self.skill_dirs = dirs.into_iter().collect();
        self
    }

    /// Keep a memory in `file`.
    pub fn memory(mut self, file: impl Into<PathBuf>) -> Self {
        self.memory = Some(file.into());
        self
    }

    /// A builder for one chat, with `base` (the app's or person's own
    /// text) first.
    pub fn builder(&self, base: Option<&str>) -> PromptBuilder {
        let mut builder = PromptBuilder::new().tool_mode(self.tool_mode);
        if let Some(base) = base {
            builder = builder.base(base);
        }
        let mut skill_roots = self.skill_dirs.clone();
        if let Some(dir) = &self.project_dir {
            let mut docs = ProjectDocs::new(dir.clone());
            if let Some(names) = &self.project_doc_names {
                docs = docs.names(names.iter().cloned());
            }
            if let Some(max) = self.project_doc_max_bytes {
                docs = docs.max_bytes(max);
            }
            if let Some(root) = docs.folders().first() {
                skill_roots.push(root.join(PROJECT_SKILLS_DIR));
            }
            builder = builder.project(docs);
        }
        skill_roots.extend(self.user_skill_dir.clone());
        if !skill_roots.is_empty() {
            builder = builder.skills(Arc::new(Skills::new(skill_roots)));
        }
        if let Some(file) = &self.memory {
            builder = builder.memory(Arc::new(MemoryFile::new(file.clone())));
        }
        builder
    }
}
