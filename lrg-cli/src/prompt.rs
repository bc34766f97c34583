//! The prompt sections from the flags (`--no-project-context`, `--skills`,
//! `--memory`, `serve --project`), and `lrg prompt`, which prints what the
//! next model turn would send.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lrg_chat::prompt::{AddedBy, PromptContext, PromptPreview};
use lrg_chat::tools::ToolClass;
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::text_tools::ToolMode;
use lrg_providers::{ModelLocation, ModelRef, ScriptedModel};

use crate::cli::{ContextArgs, ModelArgs, PromptArgs, SkillMemoryArgs};
use crate::exit::{CliError, Exit};
use crate::{out, usage};

/// The prompt context of `run`, `chat`, `acp` and `prompt`: the project of
/// `dir` (the working directory, or an editor session's) unless
/// `--no-project-context`, the skills and the memory file.
pub fn context(
    args: &ContextArgs,
    model: &ModelArgs,
    dir: Option<&Path>,
) -> Result<PromptContext, CliError> {
    let mut context = extras(&args.extras, model)?;
    if !args.no_project_context {
        context.project_dir = match dir {
            Some(dir) => Some(dir.to_path_buf()),
            None => Some(
                std::env::current_dir()
                    .map_err(|e| usage!("cannot read the working directory: {e}"))?,
            ),
        };
    }
    Ok(context)
}

/// The prompt context of served chats: no project unless `--project DIR`.
pub fn serve_context(
    project: Option<&PathBuf>,
    args: &SkillMemoryArgs,
    model: &ModelArgs,
) -> Result<PromptContext, CliError> {
    let mut context = extras(args, model)?;
    if let Some(dir) = project {
        if !dir.is_dir() {
            return Err(usage!("--project {}: not a folder", dir.display()));
        }
        context.project_dir = Some(dir.clone());
    }
    Ok(context)
}

/// Skills, memory and the tool mode (for previews).
fn extras(args: &SkillMemoryArgs, model: &ModelArgs) -> Result<PromptContext, CliError> {
    for dir in &args.skills {
        if !dir.is_dir() {
            return Err(usage!("--skills {}: not a folder", dir.display()));
        }
    }
    if let Some(file) = &args.memory
        && file.is_dir()
    {
        return Err(usage!(
            "--memory {}: is a folder; give a Markdown file",
            file.display()
        ));
    }
    let mut context = PromptContext::new().skill_dirs(args.skills.iter().cloned());
    context.user_skill_dir = crate::setup::config_dir().map(|d| d.join("lrg").join("skills"));
    context.memory = args.memory.clone();
    // `project_doc_names` of the config file (default AGENTS.md alone).
    context.project_doc_names = crate::config_file::get().project_doc_names.clone();
    context.tool_mode = tool_mode(model);
    Ok(context)
}

/// `--tool-format` where it applies: a model on a server you run.
fn tool_mode(model: &ModelArgs) -> ToolMode {
    let on_a_server = model
        .model
        .as_deref()
        .and_then(|m| m.trim().parse::<ModelRef>().ok())
        .is_some_and(|m| m.provider.locality() == ModelLocation::Server);
    match model.tool_format {
        Some(mode) if on_a_server => mode,
        _ => ToolMode::Native,
    }
}

/// `lrg prompt`.
pub async fn prompt(args: PromptArgs) -> Result<Exit, CliError> {
    let schema = args
        .output_schema
        .as_deref()
        .map(crate::run::read_schema)
        .transpose()?;
    let context = context(&args.context, &args.model, None)?;
    let builder = context.builder(args.system.as_deref());
    let permissions = crate::setup::permissions(&args.permissions)?;
    let chosen = args
        .model
        .model
        .as_deref()
        .is_some_and(|m| !m.trim().is_empty());
    let model = if chosen {
        crate::resolve::resolve(&args.model, None).await?.model
    } else {
        // No model: what one that takes tools natively is sent (no text
        // guidance, nothing typed). It is never asked anything.
        Arc::new(ScriptedModel::new(Vec::new()))
    };
    let host = crate::tools::host(&args.tools, false).await?;
    let added = builder.add_tools(&host);
    let mut session = ChatSession::builder(Arc::new(FixedModel(model)))
        .tools(host.clone())
        .permissions(permissions)
        .prompt(builder);
    if args.sub_agents {
        session = session.sub_agents(lrg_chat::sub_agents::SubAgents::default());
    }
    let session = session.build();
    let preview = session.next_prompt(schema.as_ref()).await;
    host.shutdown().await;
    added.map_err(|e| CliError::failed(anyhow::anyhow!("{e}")))?;
    let mut preview = preview.map_err(|e| usage!("--model: {e}"))?;
    if !chosen {
        preview.model = None;
    }
    if args.json {
        out::line(serde_json::to_string_pretty(&preview).unwrap_or_default());
    } else {
        print_text(&preview);
    }
    Ok(Exit::Replied)
}

/// Each section under a label line, then the tools.
fn print_text(preview: &PromptPreview) {
    let model = preview
        .model
        .as_deref()
        .unwrap_or("none chosen: as a model that takes tools natively gets it");
    out::line(format_args!("Model: {model}"));
    if preview.sections.is_empty() {
        out::line("\n(no system prompt)");
    }
    for section in &preview.sections {
        let mut label = format!("── {}", section.name.as_str());
        if let Some(source) = &section.source {
            label.push_str(&format!(" ({})", source.display()));
        }
        match section.added_by {
            AddedBy::Provider => label.push_str(", added by the provider"),
            AddedBy::Session => label.push_str(", added by the session"),
            _ => {}
        }
        out::line(format_args!("\n{label} ──"));
        out::line(&section.text);
    }
    out::line(format_args!("\nTools ({}):", preview.tools.len()));
    let width = preview
        .tools
        .iter()
        .map(|t| t.name.chars().count())
        .max()
        .unwrap_or(0);
    for tool in &preview.tools {
        let class = match tool.class {
            ToolClass::Read => "read",
            ToolClass::Change => "change",
            ToolClass::Destructive => "destructive",
        };
        out::line(format_args!(
            "  {:width$}  {:<11}  {}",
            tool.name,
            class,
            crate::style::clip(&tool.description, 80)
        ));
    }
}
