//! MCP resources and structured tool output through the library: against
//! server-everything (npm fixtures; see `tools_npm`), whose
//! `get-resource-links` the model follows with `read_mcp_resource` and
//! whose `get-structured-content` carries an output schema; and against
//! in-process servers with a read that never ends, listings and reads
//! over the caps, and results that break their output schema.

use std::sync::Arc;
use std::time::Duration;

use lrg_chat::events::Event;
use lrg_chat::tools::{
    McpConfig, McpRequestError, ResourceBody, ToolHost, ToolHostOptions, ToolOutput, Tools,
};
use lrg_chat::{ChatSession, FixedModel, Mode, PermissionSettings, Permissions};
use lrg_providers::{Part, ScriptedModel, ScriptedTurn};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::session_support::{calls, finish, reply, wait_for};
use crate::tools_npm::server_script;

const WAIT: Duration = Duration::from_secs(90);

fn session(host: &Arc<ToolHost>, turns: Vec<ScriptedTurn>) -> ChatSession {
    let settings = PermissionSettings {
        mode: Mode::AutoAll,
        ..Default::default()
    };
    ChatSession::builder(Arc::new(FixedModel::new(ScriptedModel::new(turns))))
        .tools(host.clone())
        .permissions(Arc::new(Permissions::new(settings)))
        .build()
}

fn text_of(out: &ToolOutput) -> String {
    out.parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A host with server-everything as `everything`, or `None` when the npm
/// fixtures are missing (a failure under CI).
async fn everything() -> Option<Arc<ToolHost>> {
    let script = server_script("server-everything")?;
    let config = McpConfig::from_json(
        &json!({"mcpServers": {"everything": {"command": "node", "args": [script, "stdio"]}}})
            .to_string(),
    )
    .unwrap();
    let host = Arc::new(ToolHost::with_options(ToolHostOptions {
        connect_timeout: Duration::from_secs(60),
        ..Default::default()
    }));
    let failures = host.add_mcp_config(&config).await;
    assert!(failures.is_empty(), "{failures:?}");
    Some(host)
}

/// Every numbered `tool_done`, in order, until the message ends.
async fn tool_dones(chat: &ChatSession, handle: lrg_chat::TurnHandle) -> Vec<Event> {
    finish(handle).await;
    chat.events()
        .entries()
        .into_iter()
        .map(|e| e.event.clone())
        .filter(|e| matches!(e, Event::ToolDone { .. }))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_resources_through_the_library() {
    tokio::time::timeout(WAIT, async {
        let Some(host) = everything().await else {
            return;
        };
        let names: Vec<String> = host.tools().into_iter().map(|t| t.spec.name).collect();
        for own in ["list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"] {
            assert!(names.iter().any(|n| n == own), "{own} offered: {names:?}");
        }
        let resources = host.resources().await;
        assert!(resources.failures.is_empty(), "{:?}", resources.failures);
        let doc = resources
            .items
            .iter()
            .find(|r| r.uri.starts_with("demo://resource/static/document/"))
            .expect("its static documents");
        assert_eq!(doc.server, "everything");
        let as_json = serde_json::to_value(doc).unwrap();
        assert!(as_json.get("mimeType").is_some(), "{as_json}");
        let templates = host.resource_templates().await;
        assert!(
            templates
                .items
                .iter()
                .any(|t| t.uri_template == "demo://resource/dynamic/text/{resourceId}"),
            "{:?}",
            templates.items
        );
        let read = host
            .read_resource("everything", "demo://resource/dynamic/text/2")
            .await
            .unwrap();
        match &read[0].body {
            ResourceBody::Text(t) => assert!(t.starts_with("Resource 2:"), "{t}"),
            other => panic!("text expected, got {other:?}"),
        }
        let blob = host
            .read_resource("everything", "demo://resource/dynamic/blob/1")
            .await
            .unwrap();
        assert!(matches!(&blob[0].body, ResourceBody::Blob(b) if !b.is_empty()));
        let unknown = host.read_resource("nobody", "x://y").await.unwrap_err();
        assert!(
            matches!(&unknown, McpRequestError::UnknownServer { known, .. } if known == "everything"),
            "{unknown}"
        );
        // The structured tool's output schema is kept on its spec.
        let structured = host
            .tools()
            .into_iter()
            .find(|t| t.spec.name == "get-structured-content")
            .unwrap();
        assert!(structured.spec.output_schema.is_some());
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_follows_a_resource_link_and_gets_structured_content() {
    tokio::time::timeout(WAIT, async {
        let Some(host) = everything().await else {
            return;
        };
        let chat = session(
            &host,
            vec![
                calls(&[("get-resource-links", json!({"count": 2}))]),
                calls(&[(
                    "read_mcp_resource",
                    json!({"server": "everything", "uri": "demo://resource/dynamic/text/2"}),
                )]),
                calls(&[("get-structured-content", json!({"location": "Chicago"}))]),
                calls(&[("list_mcp_resources", json!({}))]),
                reply("done"),
            ],
        );
        let handle = chat.send("look around").unwrap();
        let dones = tool_dones(&chat, handle).await;
        assert_eq!(dones.len(), 4, "{dones:?}");
        let Event::ToolDone {
            ok, text, resources, ..
        } = &dones[0]
        else {
            unreachable!()
        };
        assert!(ok);
        assert_eq!(resources.len(), 2, "two links, typed: {resources:?}");
        assert_eq!(resources[1].uri, "demo://resource/dynamic/text/2");
        assert_eq!(resources[1].server, "everything");
        assert!(
            text.contains(
                r#"read it with read_mcp_resource {"server":"everything","uri":"demo://resource/dynamic/text/2"}"#
            ),
            "the model is told how to read a link: {text}"
        );
        let Event::ToolDone { ok, text, .. } = &dones[1] else {
            unreachable!()
        };
        assert!(ok, "{text}");
        assert!(text.contains("Resource 2: This is a plaintext resource"), "{text}");
        let Event::ToolDone {
            ok,
            structured,
            text,
            ..
        } = &dones[2]
        else {
            unreachable!()
        };
        assert!(ok, "{text}");
        assert_eq!(
            structured.as_ref().unwrap(),
            &json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})
        );
        // The text already carried the JSON: it is not repeated.
        assert_eq!(text.matches("humidity").count(), 1, "{text}");
        let Event::ToolDone { ok, text, .. } = &dones[3] else {
            unreachable!()
        };
        assert!(ok, "{text}");
        let listed: Value = serde_json::from_str(text).unwrap();
        assert!(
            listed["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["server"] == "everything"),
            "{listed}"
        );
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribed_resource_update_is_an_event() {
    tokio::time::timeout(WAIT, async {
        let Some(host) = everything().await else {
            return;
        };
        let chat = session(&host, vec![]);
        let mut sub = chat.subscribe(0);
        let uri = "demo://resource/dynamic/text/1";
        host.subscribe_resource("everything", uri).await.unwrap();
        // The server sends updates to subscribers once this is on.
        let out = host
            .call(
                "toggle-subscriber-updates",
                json!({}),
                CancellationToken::new(),
            )
            .await;
        assert!(!out.is_error, "{}", text_of(&out));
        let entry = wait_for(&mut sub, |e| matches!(e, Event::ResourceUpdated { .. })).await;
        let Event::ResourceUpdated { server, uri: got } = &entry.event else {
            unreachable!()
        };
        assert_eq!((server.as_str(), got.as_str()), ("everything", uri));
        assert!(entry.seq.is_some(), "kept, so a page rebuilds it");
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

/// An in-process server with resources: `hang://` reads never answer,
/// `big://` is 1 MiB of text, 250 resources come in one page, and two
/// tools declare an output schema (`weather` keeps it, `broken` breaks it).
#[derive(Clone)]
struct Library;

const BIG: usize = 1024 * 1024;

impl ServerHandler for Library {
    fn get_info(&self) -> ServerConfig {
        let caps: ServerCapabilities =
            serde_json::from_value(json!({"tools": {}, "resources": {}})).unwrap();
        ServerConfig::new(caps)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let items = (0..250)
            .map(|i| Resource::new(format!("mem://item/{i}"), format!("item {i}")))
            .collect();
        Ok(ListResourcesResult::with_all_items(items))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri.starts_with("hang://") {
            std::future::pending::<()>().await;
        }
        let text = if request.uri.starts_with("big://") {
            "x".repeat(BIG)
        } else {
            format!("contents of {}", request.uri)
        };
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, request.uri)]).into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tool = |name: &str| {
            let mut tool = Tool::new(name.to_owned(), "weather", serde_json::Map::new());
            let schema = json!({"type": "object", "properties": {"temperature": {"type": "number"}},
                                "required": ["temperature"]});
            tool.output_schema = Some(Arc::new(schema.as_object().unwrap().clone()));
            tool
        };
        Ok(ListToolsResult::with_all_items(vec![
            tool("weather"),
            tool("broken"),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut result = CallToolResult::success(vec![ContentBlock::text("Here it is.")]);
        result.structured_content = Some(if request.name == "broken" {
            json!({"temperature": "warm"})
        } else {
            json!({"temperature": 21.5})
        });
        Ok(result.into())
    }
}

async fn library(call_timeout: Duration) -> ToolHost {
    let host = ToolHost::with_options(ToolHostOptions {
        call_timeout,
        ..Default::default()
    });
    host.add_in_process("library", || Library).await.unwrap();
    host
}

#[tokio::test]
async fn a_resource_read_that_never_ends_times_out() {
    let host = library(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let e = host
        .read_resource("library", "hang://forever")
        .await
        .unwrap_err();
    assert!(matches!(e, McpRequestError::TimedOut { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let out = host
        .call(
            "read_mcp_resource",
            json!({"server": "library", "uri": "hang://forever"}),
            CancellationToken::new(),
        )
        .await;
    assert!(out.is_error);
    assert_eq!(
        text_of(&out),
        "The resource hang://forever was not read: tool server `library` did not answer \
         resources/read within 0.3 s."
    );
    // The server still answers what does end.
    let out = host
        .call(
            "read_mcp_resource",
            json!({"server": "library", "uri": "mem://item/1"}),
            CancellationToken::new(),
        )
        .await;
    assert!(!out.is_error, "{}", text_of(&out));
    assert!(text_of(&out).ends_with("contents of mem://item/1"));
    host.shutdown().await;
}

#[tokio::test]
async fn listings_and_reads_over_the_caps_are_cut_and_say_so() {
    let host = library(Duration::from_secs(30)).await;
    let list = |cursor: Option<Value>| {
        let mut args = json!({"server": "library"});
        if let Some(c) = cursor {
            args["cursor"] = c;
        }
        host.call("list_mcp_resources", args, CancellationToken::new())
    };
    let first: Value = serde_json::from_str(&text_of(&list(None).await)).unwrap();
    assert_eq!(first["resources"].as_array().unwrap().len(), 100);
    assert!(
        first["note"]
            .as_str()
            .unwrap()
            .contains("At most 100 resources"),
        "{first}"
    );
    let cursor = first["more"][0]["cursor"].clone();
    let second: Value = serde_json::from_str(&text_of(&list(Some(cursor)).await)).unwrap();
    assert_eq!(second["resources"][0]["uri"], "mem://item/100");
    let third: Value = serde_json::from_str(&text_of(
        &list(Some(second["more"][0]["cursor"].clone())).await,
    ))
    .unwrap();
    assert_eq!(third["resources"].as_array().unwrap().len(), 50);
    assert!(third.get("more").is_none(), "the end: {third}");
    let bad = list(Some(json!("garbage"))).await;
    assert!(
        bad.is_error && text_of(&bad).contains("is not a cursor"),
        "{bad:?}"
    );

    let big = host
        .call(
            "read_mcp_resource",
            json!({"server": "library", "uri": "big://one"}),
            CancellationToken::new(),
        )
        .await;
    assert!(!big.is_error);
    let text = text_of(&big);
    assert!(text.len() < 70 * 1024, "capped: {} bytes", text.len());
    assert!(
        text.ends_with(&format!(
            "[cut: the resource has {BIG} bytes of text; only the first 65536 are shown]"
        )),
        "{}",
        &text[text.len() - 100..]
    );
    // The library call itself gives it whole.
    let whole = host.read_resource("library", "big://one").await.unwrap();
    assert!(matches!(&whole[0].body, ResourceBody::Text(t) if t.len() == BIG));
    host.shutdown().await;
}

#[tokio::test]
async fn a_result_that_breaks_its_output_schema_is_an_error() {
    let host = library(Duration::from_secs(30)).await;
    let spec = host
        .tools()
        .into_iter()
        .find(|t| t.spec.name == "weather")
        .unwrap()
        .spec;
    assert_eq!(
        spec.output_schema.unwrap()["required"],
        json!(["temperature"])
    );
    let good = host
        .call("weather", json!({}), CancellationToken::new())
        .await;
    assert!(!good.is_error);
    assert_eq!(good.structured, Some(json!({"temperature": 21.5})));
    // The text did not carry it: the model gets it as compact JSON.
    assert_eq!(text_of(&good), "Here it is.\n{\"temperature\":21.5}");
    let bad = host
        .call("broken", json!({}), CancellationToken::new())
        .await;
    assert!(bad.is_error);
    let text = text_of(&bad);
    assert!(
        text.starts_with("The structured result of `broken` does not match its output schema:")
            && text.contains("/temperature"),
        "{text}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn no_resource_tools_without_a_server_that_has_resources() {
    #[derive(Clone)]
    struct ToolsOnly;
    impl ServerHandler for ToolsOnly {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(serde_json::from_value(json!({"tools": {}})).unwrap())
        }
    }
    let host = ToolHost::new();
    host.add_in_process("plain", || ToolsOnly).await.unwrap();
    let names: Vec<String> = host.tools().into_iter().map(|t| t.spec.name).collect();
    assert!(
        !names.iter().any(|n| n.contains("mcp_resource")),
        "{names:?}"
    );
    let e = host.read_resource("plain", "x://y").await.unwrap_err();
    assert!(matches!(e, McpRequestError::NotOffered { .. }), "{e}");
    host.shutdown().await;
}

#[test]
fn wire_format_of_links_structured_results_and_updates() {
    let link: lrg_chat::tools::ResourceRef = serde_json::from_value(json!({
        "server": "everything", "uri": "demo://resource/dynamic/text/2",
        "name": "Text Resource 2", "mimeType": "text/plain", "embedded": false}))
    .unwrap();
    let done = Event::ToolDone {
        call_id: "c1".into(),
        ok: true,
        text: "links".into(),
        images: Vec::new(),
        structured: Some(json!({"temperature": 21})),
        resources: vec![link],
    };
    assert_eq!(
        serde_json::to_value(&done).unwrap(),
        json!({"type": "tool_done", "call_id": "c1", "ok": true, "text": "links",
               "structured": {"temperature": 21},
               "resources": [{"server": "everything", "uri": "demo://resource/dynamic/text/2",
                              "name": "Text Resource 2", "mimeType": "text/plain",
                              "embedded": false}]})
    );
    // Without them, a tool_done is as it always was.
    let plain = Event::ToolDone {
        call_id: "c2".into(),
        ok: true,
        text: "ok".into(),
        images: Vec::new(),
        structured: None,
        resources: Vec::new(),
    };
    assert_eq!(
        serde_json::to_value(&plain).unwrap(),
        json!({"type": "tool_done", "call_id": "c2", "ok": true, "text": "ok"})
    );
    let updated = Event::ResourceUpdated {
        server: "everything".into(),
        uri: "demo://x".into(),
    };
    assert_eq!(
        serde_json::to_value(&updated).unwrap(),
        json!({"type": "resource_updated", "server": "everything", "uri": "demo://x"})
    );
    // A spec without an output schema serializes as before.
    let spec = lrg_providers::ToolSpec {
        name: "t".into(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
        annotations: Default::default(),
        output_schema: None,
    };
    assert!(
        serde_json::to_value(&spec)
            .unwrap()
            .get("output_schema")
            .is_none()
    );
}
