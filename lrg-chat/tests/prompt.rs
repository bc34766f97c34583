//! The prompt builder (`lrg_chat::prompt`): project instructions found from
//! the working directory up to the repository root, under a cap; skills
//! listed and loaded (confined to their folder); a memory file shared by two
//! chats; the built prompt section by section; an edited AGENTS.md taking
//! effect on the next message; the preview route.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::path::Path;
use std::sync::Arc;

use lrg_chat::OutputSchema;
use lrg_chat::events::Event;
use lrg_chat::http::{ChatServer, HttpConfig, MenuEntry, StandardOpener, StaticMenu};
use lrg_chat::prompt::{
    AddedBy, MemoryFile, ProjectDocs, PromptBuilder, PromptContext, SectionName, Skills,
};
use lrg_chat::tools::{ToolHost, Tools as _};
use lrg_chat::{Answer, ChatSession, FixedModel, TurnOutcome};
use lrg_providers::text_tools::{ToolFormat, ToolMode};
use lrg_providers::{ModelInfo, ModelLocation, ScriptedModel, ToolSpec};
use serde_json::{Value, json};
use session_support::{calls, finish, next_approval, reply};
use tokio_util::sync::CancellationToken;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn info() -> ModelInfo {
    ModelInfo::new("script", "scripted", ModelLocation::Local)
}

/// `<tmp>/AGENTS.md` (outside the repository), `<tmp>/repo/.git`,
/// `repo/AGENTS.md`, `repo/a/AGENTS.md`, `repo/a/b/AGENTS.md`.
fn nested_repo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write(&root.join("AGENTS.md"), "Outside the repository.\n");
    std::fs::create_dir_all(root.join("repo/.git")).unwrap();
    write(&root.join("repo/AGENTS.md"), "Root rules.\n");
    write(&root.join("repo/a/AGENTS.md"), "Rules of a.\n");
    write(&root.join("repo/a/b/AGENTS.md"), "Rules of b.\n");
    tmp
}

#[test]
fn project_docs_go_root_first_nearest_last_and_stop_at_the_repository_root() {
    let tmp = nested_repo();
    let docs = ProjectDocs::new(tmp.path().join("repo/a/b")).load();
    let real = std::fs::canonicalize(tmp.path().join("repo")).unwrap();
    let paths: Vec<_> = docs.iter().map(|d| d.path.clone()).collect();
    assert_eq!(
        paths,
        vec![
            real.join("AGENTS.md"),
            real.join("a/AGENTS.md"),
            real.join("a/b/AGENTS.md")
        ]
    );
    assert!(
        docs[0]
            .text
            .starts_with("Project instructions from AGENTS.md:\n\nRoot rules.")
    );
    assert!(docs[2].text.contains("from a/b/AGENTS.md (nearer"));
    assert!(docs[2].text.ends_with("Rules of b."));
    assert!(
        !docs.iter().any(|d| d.text.contains("Outside")),
        "nothing above .git"
    );
}

#[test]
fn outside_a_repository_only_the_working_directory_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    write(&tmp.path().join("AGENTS.md"), "Parent.\n");
    write(&tmp.path().join("here/AGENTS.md"), "Here.\n");
    let docs = ProjectDocs::new(tmp.path().join("here")).load();
    assert_eq!(docs.len(), 1, "{docs:?}");
    assert!(docs[0].text.ends_with("Here."));
}

#[test]
fn project_doc_names_are_configurable_and_read_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    write(&tmp.path().join("AGENTS.md"), "agents\n");
    write(&tmp.path().join("CLAUDE.md"), "claude\n");
    let docs = ProjectDocs::new(tmp.path())
        .names(["CLAUDE.md", "AGENTS.md", "../escape"])
        .load();
    let texts: Vec<_> = docs.iter().map(|d| d.text.as_str()).collect();
    assert_eq!(texts.len(), 2);
    assert!(texts[0].ends_with("claude") && texts[1].ends_with("agents"));
    // The default reads AGENTS.md alone.
    assert_eq!(ProjectDocs::new(tmp.path()).load().len(), 1);
}

#[test]
fn the_cap_cuts_on_a_character_boundary_with_a_note_and_leaves_out_the_rest() {
    let tmp = nested_repo();
    // "é" is two bytes: a cap of 5 falls inside the third one.
    write(&tmp.path().join("repo/AGENTS.md"), "éééé\n");
    let docs = ProjectDocs::new(tmp.path().join("repo/a/b"))
        .max_bytes(5)
        .load();
    assert_eq!(docs.len(), 3);
    assert_eq!(
        docs[0].text,
        "Project instructions from AGENTS.md:\n\néé\n\n[Cut here: the project instructions \
         reached their cap of 5 bytes; 4 of this file's 8 bytes are shown.]"
    );
    // One byte was left, so the next file gets it (and a note), the last none.
    assert!(
        docs[1].text.contains("\n\nR\n\n[Cut here"),
        "{}",
        docs[1].text
    );
    assert!(docs[2].text.ends_with(
        "[Left out: the project instructions reached their cap of 5 bytes before this file.]"
    ));
    // The default cap is 32 KiB.
    write(&tmp.path().join("repo/AGENTS.md"), &"x".repeat(40_000));
    let docs = ProjectDocs::new(tmp.path().join("repo")).load();
    assert!(
        docs[0]
            .text
            .contains("cap of 32768 bytes; 32768 of this file's 40000")
    );
}

/// A skill `pdf` with a file, under `<tmp>/skills`, and a secret beside it.
fn skills_dir() -> (tempfile::TempDir, Arc<Skills>) {
    let tmp = tempfile::tempdir().unwrap();
    write(
        &tmp.path().join("skills/pdf/SKILL.md"),
        "---\nname: pdf\ndescription: >\n  Fill in PDF forms;\n  read reference/forms.md first.\n---\n\n# PDF forms\n\nRead `reference/forms.md`.\n",
    );
    write(
        &tmp.path().join("skills/pdf/reference/forms.md"),
        "Field names are case-sensitive.\n",
    );
    write(
        &tmp.path().join("skills/broken/SKILL.md"),
        "no front matter\n",
    );
    write(&tmp.path().join("secret.txt"), "the secret\n");
    let skills = Arc::new(Skills::new([tmp.path().join("skills")]));
    (tmp, skills)
}

async fn load(host: &ToolHost, args: Value) -> (bool, String) {
    let out = host
        .call("load_skill", args, CancellationToken::new())
        .await;
    let text = out
        .parts
        .iter()
        .filter_map(|p| match p {
            lrg_providers::Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<String>();
    (out.is_error, text)
}

#[tokio::test]
async fn a_skill_loads_with_one_of_its_files_and_paths_out_of_its_folder_are_refused() {
    let (tmp, skills) = skills_dir();
    let listed = skills.list();
    assert_eq!(listed.len(), 1, "the broken skill is skipped: {listed:?}");
    assert_eq!(
        listed[0].description,
        "Fill in PDF forms; read reference/forms.md first."
    );
    let host = ToolHost::new();
    PromptBuilder::new()
        .skills(skills.clone())
        .add_tools(&host)
        .unwrap();
    let spec = host.list().await.unwrap();
    assert_eq!(spec.len(), 1);
    assert_eq!(spec[0].annotations.read_only_hint, Some(true), "read class");

    assert_eq!(
        load(&host, json!({"name": "pdf"})).await,
        (
            false,
            "# PDF forms\n\nRead `reference/forms.md`.".to_owned()
        )
    );
    assert_eq!(
        load(&host, json!({"name": "pdf", "file": "reference/forms.md"})).await,
        (false, "Field names are case-sensitive.\n".to_owned())
    );
    let (error, text) = load(&host, json!({"name": "pdf", "file": "../../secret.txt"})).await;
    assert!(error && text.contains("`..` is refused"), "{text}");
    let absolute = tmp.path().join("secret.txt").display().to_string();
    let (error, text) = load(&host, json!({"name": "pdf", "file": absolute})).await;
    assert!(
        error && text.contains("absolute paths are refused"),
        "{text}"
    );
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(
            tmp.path().join("secret.txt"),
            tmp.path().join("skills/pdf/link.txt"),
        )
        .unwrap();
        let (error, text) = load(&host, json!({"name": "pdf", "file": "link.txt"})).await;
        assert!(
            error && text.contains("leads out of the skill's folder"),
            "{text}"
        );
        assert!(!text.contains("the secret"));
    }
    let (error, text) = load(&host, json!({"name": "nope"})).await;
    assert!(error && text.contains("Available skills: pdf."), "{text}");
    let (error, text) = load(&host, json!({"name": "pdf", "file": "missing.md"})).await;
    assert!(error && text.contains("no such file"), "{text}");
}

#[test]
fn no_skills_found_offers_no_load_skill_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let host = ToolHost::new();
    PromptBuilder::new()
        .skills(Arc::new(Skills::new([tmp.path().join("none")])))
        .add_tools(&host)
        .unwrap();
    assert!(host.tools().is_empty());
}

/// A session on `model` whose prompt is `context`'s, with its tools.
fn chat(model: &ScriptedModel, context: &PromptContext) -> ChatSession {
    let host = Arc::new(ToolHost::new());
    let builder = context.builder(Some("Be brief."));
    builder.add_tools(&host).unwrap();
    ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .tools(host)
        .prompt(builder)
        .build()
}

#[tokio::test]
async fn memory_is_shared_by_two_chats_and_remember_asks_first() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("memory.md");
    let context = PromptContext::new().memory(&file);
    let first_model = ScriptedModel::new(vec![
        calls(&[("remember", json!({"fact": "The user prefers tabs."}))]),
        reply("I will remember."),
    ]);
    let second_model = ScriptedModel::new(vec![reply("one"), reply("two")]);
    let first = chat(&first_model, &context);
    let second = chat(&second_model, &context);

    // The second chat's first message: nothing remembered yet.
    finish(second.send("hello").unwrap()).await;
    let system = second_model.requests()[0].system.clone().unwrap();
    assert!(system.contains("(Nothing remembered yet.)"), "{system}");

    // `remember` is change-class: under the default mode it asks.
    let mut sub = first.subscribe(0);
    let handle = first.send("remember that I like tabs").unwrap();
    let call_id = next_approval(&mut sub).await;
    first.answer_approval(&call_id, Answer::Once).unwrap();
    assert!(matches!(
        finish(handle).await,
        TurnOutcome::Completed { .. }
    ));
    let done = first
        .events()
        .entries()
        .into_iter()
        .find_map(|e| match &e.event {
            Event::ToolDone { ok, text, .. } => Some((*ok, text.clone())),
            _ => None,
        });
    assert_eq!(
        done,
        Some((true, "Remembered: The user prefers tabs.".to_owned()))
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "- The user prefers tabs.\n"
    );

    // The other chat's next prompt has it.
    finish(second.send("again").unwrap()).await;
    let system = second_model.requests()[1].system.clone().unwrap();
    assert!(system.contains("- The user prefers tabs."), "{system}");

    // Forgetting, from either chat's file handle.
    let memory = MemoryFile::new(&file);
    assert_eq!(
        memory.forget("the user PREFERS tabs.").unwrap(),
        "Forgot 1 line: the user PREFERS tabs."
    );
    assert_eq!(
        memory.forget("The user prefers tabs.").unwrap(),
        "Nothing matched `The user prefers tabs.`; the memory is unchanged."
    );
}

#[tokio::test]
async fn an_edited_agents_md_applies_on_the_next_message() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    let agents = tmp.path().join("AGENTS.md");
    write(&agents, "Answer in English.\n");
    let model = ScriptedModel::new(vec![reply("one"), reply("two"), reply("three")]);
    let session = chat(&model, &PromptContext::new().project_dir(tmp.path()));
    finish(session.send("first").unwrap()).await;
    write(&agents, "Answer in French, always.\n");
    finish(session.send("second").unwrap()).await;
    finish(session.send("third").unwrap()).await;
    let systems: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r.system.clone().unwrap())
        .collect();
    assert!(systems[0].starts_with("Be brief.\n\nProject instructions from AGENTS.md:"));
    assert!(systems[0].ends_with("Answer in English."), "{}", systems[0]);
    assert!(
        systems[1].ends_with("Answer in French, always."),
        "{}",
        systems[1]
    );
    assert_eq!(systems[1], systems[2]);
}

/// A temp project with every section's source: AGENTS.md, a skill, a
/// memory file with one fact.
fn full_context(tmp: &Path) -> PromptContext {
    std::fs::create_dir_all(tmp.join("repo/.git")).unwrap();
    write(
        &tmp.join("repo/AGENTS.md"),
        "Run `cargo test` before you finish.\n",
    );
    write(
        &tmp.join("repo/.lrg/skills/release/SKILL.md"),
        "---\nname: release\ndescription: Cut a release: bump, tag, changelog.\n---\nSteps.\n",
    );
    write(&tmp.join("memory.md"), "- The user's name is Ada.\n");
    PromptContext::new()
        .project_dir(tmp.join("repo"))
        .memory(tmp.join("memory.md"))
}

fn spawn_spec() -> ToolSpec {
    ToolSpec {
        name: lrg_chat::sub_agents::SPAWN_SUB_AGENT.into(),
        description: "Delegate.".into(),
        input_schema: json!({"type": "object"}),
        annotations: Default::default(),
        output_schema: None,
    }
}

/// The built prompt with the sections named, for a snapshot.
fn shown(builder: &PromptBuilder, tools: &[ToolSpec]) -> String {
    let built = builder.build(&info(), tools);
    let names: Vec<_> = built.sections.iter().map(|s| s.name.as_str()).collect();
    format!("sections: {names:?}\n---\n{}", built.text())
}

async fn offered(builder: &PromptBuilder) -> Vec<ToolSpec> {
    let host = ToolHost::new();
    builder.add_tools(&host).unwrap();
    host.list().await.unwrap()
}

#[tokio::test]
async fn snapshots_of_the_built_prompt_with_each_section_on_and_off() {
    let tmp = tempfile::tempdir().unwrap();
    let full = full_context(tmp.path());

    let all = full.builder(Some("You are a careful assistant."));
    let mut tools = offered(&all).await;
    tools.push(spawn_spec());
    insta::assert_snapshot!("all_sections", shown(&all, &tools));

    // Each off in turn.
    let no_base = full.builder(None);
    insta::assert_snapshot!("no_base", shown(&no_base, &tools));
    let mut no_project = full.clone();
    no_project.project_dir = None;
    let no_project = no_project.builder(Some("You are a careful assistant."));
    // Without a project its skills are gone too, and so is load_skill.
    let mut tools_no_project = offered(&no_project).await;
    tools_no_project.push(spawn_spec());
    insta::assert_snapshot!("no_project", shown(&no_project, &tools_no_project));
    let mut no_memory = full.clone();
    no_memory.memory = None;
    let no_memory = no_memory.builder(Some("You are a careful assistant."));
    let mut tools_no_memory = offered(&no_memory).await;
    tools_no_memory.push(spawn_spec());
    insta::assert_snapshot!("no_memory", shown(&no_memory, &tools_no_memory));
    let without_spawn: Vec<_> = tools
        .iter()
        .filter(|t| t.name != "spawn_sub_agent")
        .cloned()
        .collect();
    insta::assert_snapshot!("no_sub_agents", shown(&all, &without_spawn));
    // Skills listed only while load_skill is offered (blocked: not listed).
    let without_load: Vec<_> = tools
        .iter()
        .filter(|t| t.name != "load_skill")
        .cloned()
        .collect();
    insta::assert_snapshot!("no_skills", shown(&all, &without_load));
    // Nothing on: no system prompt at all.
    let none = PromptBuilder::new().build(&info(), &[]);
    assert!(none.sections.is_empty());
    assert_eq!(none.text_opt(), None);
    // A base alone is sent as it is.
    assert_eq!(
        PromptBuilder::new()
            .base("Just this.")
            .build(&info(), &[])
            .text_opt()
            .as_deref(),
        Some("Just this.")
    );
}

#[tokio::test]
async fn the_preview_adds_what_the_session_and_the_provider_add() {
    let tmp = tempfile::tempdir().unwrap();
    let builder = PromptContext::new()
        .project_dir(tmp.path())
        .builder(Some("Base."))
        .tool_mode(ToolMode::Text(ToolFormat::Hermes));
    let tools = vec![ToolSpec {
        name: "read_note".into(),
        description: "Read a note.".into(),
        input_schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        annotations: Default::default(),
        output_schema: None,
    }];
    let schema = OutputSchema::new(json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"]
    }))
    .unwrap();
    // What is sent by the builder is the base alone.
    assert_eq!(
        builder.build(&info(), &tools).text_opt().as_deref(),
        Some("Base.")
    );
    let preview = builder.preview(&info(), &tools, Some(&schema));
    let parts: Vec<_> = preview
        .sections
        .iter()
        .map(|s| (s.name, s.added_by))
        .collect();
    assert_eq!(
        parts,
        vec![
            (SectionName::Base, AddedBy::Builder),
            (SectionName::Typed, AddedBy::Session),
            (SectionName::Tools, AddedBy::Provider),
        ]
    );
    insta::assert_snapshot!("preview_typed_and_text_tools", preview.text());
    // Native tools: no tools section.
    let native = PromptBuilder::new().base("Base.");
    assert_eq!(native.preview(&info(), &tools, None).sections.len(), 1);
}

#[tokio::test]
async fn the_prompt_route_shows_the_next_turns_prompt_under_the_chat_token() {
    let tmp = tempfile::tempdir().unwrap();
    let context = full_context(tmp.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let opener = StandardOpener::new(|_: &str| {
        Box::pin(async {
            Ok(Arc::new(ScriptedModel::named("first", vec![]))
                as Arc<dyn lrg_providers::ChatModel>)
        })
    })
    .prompt_context(context);
    let agent = "agent-token-for-tests-0123456789";
    let config = HttpConfig::new(agent).allow_origin(base.clone());
    let server = ChatServer::new(
        config,
        Arc::new(opener),
        Arc::new(StaticMenu(vec![MenuEntry::available(
            "script",
            "first",
            ModelLocation::Local,
        )])),
    );
    let app = server.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();
    let opened: Value = client
        .post(format!("{base}/v1/chat/sessions"))
        .bearer_auth(agent)
        .json(&json!({"model": "script:first", "system": "Be brief."}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = opened["session"]
        .as_str()
        .unwrap_or_else(|| panic!("{opened}"));
    let token = opened["chat_token"].as_str().unwrap();
    let url = format!("{base}/v1/chat/sessions/{id}/prompt");
    let answer = client.get(&url).bearer_auth(token).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    let names: Vec<_> = body["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["base", "project", "skills", "memory"]);
    assert_eq!(body["sections"][0]["text"], "Be brief.");
    assert_eq!(body["sections"][0]["source"], Value::Null);
    assert_eq!(body["sections"][0]["added_by"], "builder");
    assert!(
        body["sections"][1]["source"]
            .as_str()
            .unwrap()
            .ends_with("AGENTS.md")
    );
    assert_eq!(body["model"], "script:first");
    assert_eq!(
        body["tools"],
        json!([
            {"name": "load_skill", "description": "Read a skill listed in the system prompt: its instructions, or with `file` one of the files in its folder that the instructions name. Load a skill before doing a task it covers.", "class": "read"},
            {"name": "remember", "description": "Keep a fact in the memory shared across chats (it appears in the system prompt of later chats): a lasting preference or something the person asked you to remember.", "class": "change"},
            {"name": "forget", "description": "Remove a fact from the memory, as it is written there.", "class": "change"}
        ])
    );
    // Another token gets the uniform 403.
    let refused = client.get(&url).bearer_auth(agent).send().await.unwrap();
    assert_eq!(refused.status(), 403);
}
