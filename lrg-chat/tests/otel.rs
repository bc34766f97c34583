//! `lrg_chat::otel::layer` in an app's own subscriber (an in-memory
//! exporter here): a `traceparent` sent with `POST …/messages` is the
//! parent of the message's `invoke_agent` span, whose model turn is its
//! child; a malformed one starts a trace of its own; the layer takes lrg's
//! spans only.
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod http_support;

use std::sync::OnceLock;
use std::time::Duration;

use http_support::*;
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt as _;

/// The process's subscriber: the layer on a tracer that keeps every span.
fn exporter() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber =
            tracing_subscriber::registry().with(lrg_chat::otel::layer(provider.tracer("test")));
        tracing::subscriber::set_global_default(subscriber).unwrap();
        // Kept for the process: dropping it would shut the exporter down.
        std::mem::forget(provider);
        exporter
    })
}

/// The finished spans of trace `trace`, once `want` of them are there.
async fn spans_of(trace: TraceId, want: usize) -> Vec<SpanData> {
    for _ in 0..200 {
        let spans: Vec<SpanData> = exporter()
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|s| s.span_context.trace_id() == trace)
            .collect();
        if spans.len() >= want {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("fewer than {want} spans in trace {trace}");
}

/// POST a message with `traceparent` (when given); waits until it is done.
async fn send(h: &Harness, chat: &Chat, traceparent: Option<&str>) {
    let mut events = h.events(chat, 0).await;
    let mut request = h
        .client
        .post(h.url(&format!("/v1/chat/sessions/{}/messages", chat.id)))
        .bearer_auth(&chat.token)
        .json(&json!({"text": "hello"}));
    if let Some(value) = traceparent {
        request = request.header("traceparent", value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status().as_u16(), 202);
    events.until("assistant_turn", |_| true).await;
    events.idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incoming_traceparent_is_the_parent_of_the_message_span() {
    exporter();
    let h = start(
        models(vec![("script:first", scripted("first", vec![text("Hi.")]))]),
        |c| c,
    )
    .await;
    let chat = h.open(json!({"model": "script:first"})).await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    send(&h, &chat, Some(&format!("00-{trace}-{parent}-01"))).await;

    let spans = spans_of(TraceId::from_hex(trace).unwrap(), 2).await;
    let agent = spans.iter().find(|s| s.name == "invoke_agent").unwrap();
    assert_eq!(agent.parent_span_id, SpanId::from_hex(parent).unwrap());
    let turn = spans.iter().find(|s| s.name == "chat first").unwrap();
    assert_eq!(turn.parent_span_id, agent.span_context.span_id());
    assert!(
        turn.attributes
            .iter()
            .any(|kv| kv.key.as_str() == "gen_ai.provider.name" && kv.value.as_str() == "script"),
        "{:?}",
        turn.attributes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_traceparent_starts_a_trace_of_its_own() {
    exporter();
    let h = start(
        models(vec![("script:first", scripted("first", vec![text("Hi.")]))]),
        |c| c,
    )
    .await;
    let chat = h.open(json!({"model": "script:first"})).await;
    let bad_trace = "4bf92f3577b34da6a3ce929d0e0e47zz";
    send(
        &h,
        &chat,
        Some(&format!("00-{bad_trace}-00f067aa0ba902b7-01")),
    )
    .await;
    // Its message span is a root (found by the chat's own span below it).
    for _ in 0..200 {
        let spans = exporter().get_finished_spans().unwrap();
        let roots: Vec<&SpanData> = spans
            .iter()
            .filter(|s| s.name == "invoke_agent" && s.parent_span_id == SpanId::INVALID)
            .collect();
        if !roots.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no root message span");
}

#[test]
fn the_layer_takes_lrg_spans_only() {
    exporter();
    {
        let span = tracing::info_span!(target: "some_other_crate", "theirs");
        let _entered = span.enter();
        tracing::info!(target: "some_other_crate", "a log line of theirs");
    }
    let spans = exporter().get_finished_spans().unwrap();
    assert!(spans.iter().all(|s| s.name != "theirs"), "{spans:?}");
}
