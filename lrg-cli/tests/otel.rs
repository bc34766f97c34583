//! OpenTelemetry export as a user turns it on: `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointed at a local OTLP/HTTP receiver (axum, decoding the protobuf
//! requests with opentelemetry-proto), a two-tool chat against a fake
//! OpenAI server (wiremock) and the demo MCP server. Checked: span names,
//! parents (invoke_agent > chat > execute_tool > tools/call; a tool's span
//! under the turn that asked for it), attributes, the metrics, the
//! `traceparent` the model server received, that no key reaches the
//! collector; and that a dead or hung collector changes neither the exit
//! code nor the output, and holds the exit back by little (bounded loosely).
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Env, Ran, ran};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-otel-5d1c9e7a3b2f4a6c8e0d";
const DEMO: &str = "lrg demo-server";

/// What the receiver got: decoded requests and every raw body.
#[derive(Default)]
struct Received {
    traces: Vec<ExportTraceServiceRequest>,
    metrics: Vec<ExportMetricsServiceRequest>,
    raw: Vec<Vec<u8>>,
}

/// An OTLP/HTTP receiver on a free port: its endpoint and what it got.
async fn receiver() -> (String, Arc<Mutex<Received>>) {
    use axum::routing::post;
    let got = Arc::new(Mutex::new(Received::default()));
    let traces = got.clone();
    let metrics = got.clone();
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            post(move |body: axum::body::Bytes| async move {
                let request = ExportTraceServiceRequest::decode(body.as_ref()).unwrap();
                let mut got = traces.lock().unwrap();
                got.raw.push(body.to_vec());
                got.traces.push(request);
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }),
        )
        .route(
            "/v1/metrics",
            post(move |body: axum::body::Bytes| async move {
                let request = ExportMetricsServiceRequest::decode(body.as_ref()).unwrap();
                let mut got = metrics.lock().unwrap();
                got.raw.push(body.to_vec());
                got.metrics.push(request);
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), got)
}

fn sse(events: &[Value]) -> ResponseTemplate {
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn chunk(delta: Value, finish: Value, usage: Option<Value>) -> Value {
    let mut c = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4.1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    if let Some(u) = usage {
        c["usage"] = u;
    }
    c
}

fn call_turn(id: &str, tool: &str, args: &str) -> ResponseTemplate {
    sse(&[
        chunk(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
                   "function": {"name": tool, "arguments": args}}]}),
            Value::Null,
            None,
        ),
        chunk(
            json!({}),
            json!("tool_calls"),
            Some(json!({"prompt_tokens": 120, "completion_tokens": 7,
                        "prompt_tokens_details": {"cached_tokens": 100}})),
        ),
    ])
}

/// A fake OpenAI server: list_notes, then read_note, then a reply.
async fn fake_openai() -> MockServer {
    let server = MockServer::start().await;
    for turn in [
        call_turn("call_1", "list_notes", "{}"),
        call_turn("call_2", "read_note", "{\"id\": 1}"),
        sse(&[
            chunk(
                json!({"role": "assistant", "content": "Buy oat milk."}),
                Value::Null,
                None,
            ),
            chunk(
                json!({}),
                json!("stop"),
                Some(json!({"prompt_tokens": 150, "completion_tokens": 4})),
            ),
        ]),
    ] {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(turn)
            .up_to_n_times(1)
            .expect(1)
            .mount(&server)
            .await;
    }
    server
}

/// `lrg run` of the two-tool chat with `otel` in its environment: the
/// result, how long it took, and what lrg wrote to the MCP server (every
/// JSON-RPC line, copied by `tee` on the way to the demo server).
async fn run_chat(
    server: &MockServer,
    otel: Vec<(&'static str, String)>,
) -> (Ran, Duration, Vec<Value>) {
    let base = format!("{}/v1", server.uri());
    tokio::task::spawn_blocking(move || {
        let env = Env::new();
        let mut cmd = env.lrg();
        // `lrg` itself on PATH, for the shell that runs the tee.
        let exe = assert_cmd::cargo::cargo_bin("lrg");
        let path = format!(
            "{}:{}",
            exe.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mcp = format!("sh -c 'tee mcp-in.jsonl | {DEMO}'");
        cmd.args([
            "run",
            "--model",
            "openai:gpt-4.1",
            "--mcp",
            &mcp,
            "first note?",
        ])
        .env("PATH", path)
        .env("OPENAI_API_KEY", KEY)
        .env("OPENAI_BASE_URL", base);
        for (k, v) in otel {
            cmd.env(k, v);
        }
        let started = Instant::now();
        let r = ran(&mut cmd);
        let took = started.elapsed();
        let sent = std::fs::read_to_string(env.path("mcp-in.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (r, took, sent)
    })
    .await
    .unwrap()
}

fn value(v: &Option<AnyValue>) -> Value {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::ArrayValue(a)) => {
            a.values.iter().map(|v| value(&Some(v.clone()))).collect()
        }
        _ => Value::Null,
    }
}

fn attrs(kvs: &[KeyValue]) -> HashMap<String, Value> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), value(&kv.value)))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_two_tool_chat_is_one_trace_with_the_genai_spans_and_metrics() {
    let (endpoint, got) = receiver().await;
    let server = fake_openai().await;
    let (r, _, sent) = run_chat(
        &server,
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=test".into(),
            ),
        ],
    )
    .await;
    assert_eq!((r.code, r.stdout.as_str()), (0, "Buy oat milk.\n"), "{r:?}");
    assert!(!r.stderr.contains("cannot export"), "{r:?}");

    let got = std::mem::take(&mut *got.lock().unwrap());
    let mut spans: Vec<Span> = Vec::new();
    for request in &got.traces {
        for rs in &request.resource_spans {
            let resource = attrs(&rs.resource.as_ref().unwrap().attributes);
            assert_eq!(resource["service.name"], "lrg");
            assert_eq!(resource["deployment.environment"], "test");
            for ss in &rs.scope_spans {
                spans.extend(ss.spans.iter().cloned());
            }
        }
    }
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let agent = named("invoke_agent");
    assert_eq!(
        agent.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let agent = agent[0];
    assert!(
        agent.parent_span_id.is_empty(),
        "the message span is the root"
    );
    assert_eq!(
        attrs(&agent.attributes)["gen_ai.operation.name"],
        "invoke_agent"
    );
    // One trace for the whole message (the MCP server was started before
    // it, in a trace of its own).
    let in_message: Vec<&Span> = spans.iter().filter(|s| s.name != "initialize").collect();
    assert!(
        in_message.iter().all(|s| s.trace_id == agent.trace_id),
        "{:?}",
        spans
            .iter()
            .map(|s| (&s.name, hex(&s.trace_id)))
            .collect::<Vec<_>>()
    );
    assert_eq!(named("initialize").len(), 1);

    let mut turns = named("chat gpt-4.1");
    turns.sort_by_key(|s| s.start_time_unix_nano);
    assert_eq!(turns.len(), 3);
    for turn in &turns {
        assert_eq!(turn.parent_span_id, agent.span_id);
        assert_eq!(turn.kind, 3, "a client span");
    }
    let first = attrs(&turns[0].attributes);
    assert_eq!(first["gen_ai.operation.name"], "chat");
    assert_eq!(first["gen_ai.provider.name"], "openai");
    assert_eq!(first["gen_ai.request.model"], "gpt-4.1");
    assert_eq!(first["gen_ai.usage.input_tokens"], 120);
    assert_eq!(first["gen_ai.usage.output_tokens"], 7);
    assert_eq!(first["gen_ai.usage.cache_read.input_tokens"], 100);
    assert_eq!(
        first["gen_ai.response.finish_reasons"],
        json!(["tool_calls"])
    );
    assert_eq!(
        attrs(&turns[2].attributes)["gen_ai.response.finish_reasons"],
        json!(["stop"])
    );

    // Each tool's span is a child of the turn that asked for it.
    for (tool, call_id, turn) in [("list_notes", "call_1", 0), ("read_note", "call_2", 1)] {
        let spans_of = named(&format!("execute_tool {tool}"));
        assert_eq!(spans_of.len(), 1, "{tool}");
        let span = spans_of[0];
        assert_eq!(span.parent_span_id, turns[turn].span_id, "{tool}");
        let a = attrs(&span.attributes);
        assert_eq!(a["gen_ai.tool.name"], tool);
        assert_eq!(a["gen_ai.tool.call.id"], call_id);
        assert_eq!(a["gen_ai.tool.type"], "function");
        let mcp = named(&format!("tools/call {tool}"));
        assert_eq!(mcp.len(), 1, "{tool}");
        assert_eq!(mcp[0].parent_span_id, span.span_id);
        let a = attrs(&mcp[0].attributes);
        assert_eq!(a["mcp.method.name"], "tools/call");
        assert_eq!(a["network.transport"], "pipe");
        // The stdio request carried the MCP span as `_meta.traceparent`.
        let request = sent
            .iter()
            .find(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
            .unwrap_or_else(|| panic!("no tools/call {tool} in {sent:?}"));
        assert_eq!(
            request["params"]["_meta"]["traceparent"],
            format!("00-{}-{}-01", hex(&mcp[0].trace_id), hex(&mcp[0].span_id))
        );
    }

    // The model server got each turn's own span as its parent.
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3);
    for (request, turn) in requests.iter().zip(&turns) {
        let traceparent = request
            .headers
            .get("traceparent")
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(
            traceparent,
            format!("00-{}-{}-01", hex(&turn.trace_id), hex(&turn.span_id))
        );
    }

    // Metrics: tokens by type, the operation's duration, the tools'.
    let mut metrics: HashMap<String, Vec<HashMap<String, Value>>> = HashMap::new();
    for request in &got.metrics {
        for rm in &request.resource_metrics {
            for sm in &rm.scope_metrics {
                for m in &sm.metrics {
                    let points = match &m.data {
                        Some(metric::Data::Histogram(h)) => h
                            .data_points
                            .iter()
                            .map(|p| {
                                let mut a = attrs(&p.attributes);
                                a.insert("count".into(), json!(p.count));
                                a.insert("sum".into(), json!(p.sum));
                                a
                            })
                            .collect(),
                        _ => Vec::new(),
                    };
                    metrics.entry(m.name.clone()).or_default().extend(points);
                }
            }
        }
    }
    let tokens = &metrics["gen_ai.client.token.usage"];
    let of_type = |kind: &str| {
        tokens
            .iter()
            .rev()
            .find(|p| p["gen_ai.token.type"] == kind)
            .cloned()
            .unwrap()
    };
    assert_eq!(of_type("input")["sum"], json!(390.0));
    assert_eq!(of_type("input")["count"], 3);
    assert_eq!(of_type("output")["sum"], json!(18.0));
    assert_eq!(of_type("input")["gen_ai.request.model"], "gpt-4.1");
    let operation = metrics["gen_ai.client.operation.duration"].last().unwrap();
    assert_eq!(operation["count"], 3);
    assert_eq!(operation["gen_ai.operation.name"], "chat");
    let tools = &metrics["lrg.tool.duration"];
    for tool in ["list_notes", "read_note"] {
        assert!(
            tools.iter().any(|p| p["gen_ai.tool.name"] == tool),
            "{tools:?}"
        );
    }

    // Neither the key nor what was said reaches the collector.
    for body in &got.raw {
        let text = String::from_utf8_lossy(body);
        for secret in [
            KEY,
            "first note?",
            "Buy oat milk",
            "Authorization",
            "Bearer",
        ] {
            assert!(!text.contains(secret), "{secret} was exported");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_an_endpoint_no_traceparent_is_sent_anywhere() {
    let server = fake_openai().await;
    let (r, _, sent) = run_chat(&server, Vec::new()).await;
    assert_eq!((r.code, r.stdout.as_str()), (0, "Buy oat milk.\n"), "{r:?}");
    for request in server.received_requests().await.unwrap() {
        assert!(request.headers.get("traceparent").is_none());
    }
    let calls: Vec<&Value> = sent
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 2, "{sent:?}");
    for call in calls {
        assert!(
            call["params"]["_meta"].get("traceparent").is_none(),
            "{call}"
        );
    }
}

/// A run against `endpoint` ends as it does without a collector: same
/// exit code, same output, in bounded time.
async fn unbothered_by(endpoint: String) -> Ran {
    let server = fake_openai().await;
    let (r, took, _) = run_chat(&server, vec![("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)]).await;
    assert_eq!((r.code, r.stdout.as_str()), (0, "Buy oat milk.\n"), "{r:?}");
    // Loose: the flush at exit is bounded at about a second.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    r
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_collector_is_one_warning() {
    // Bound and dropped: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = unbothered_by(format!("http://127.0.0.1:{port}")).await;
    assert_eq!(r.stderr.matches("cannot export").count(), 1, "{r:?}");
    assert!(!r.stderr.contains(KEY), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_that_never_answers_does_not_hold_the_exit() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts, reads nothing, answers nothing, keeps every connection open.
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            keep.lock().unwrap().push(socket);
        }
    });
    unbothered_by(format!("http://{addr}")).await;
}
