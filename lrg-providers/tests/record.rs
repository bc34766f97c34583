//! Record and replay: a recorded run replays identically, a changed request
//! fails with a readable diff, and a recording survives a run cut short.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns may panic: this is a test
use std::time::Duration;

use futures::StreamExt as _;
use lrg_providers::record::{RECORDING_VERSION, Recording, RecordingModel, ReplayModel};
use lrg_providers::{
    ChatModel, Message, ProviderError, ScriptedModel, StopReason, ToolAnnotations, ToolResult,
    ToolSpec, TurnEvent, TurnRequest, TurnStream, collect_turn,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn script() -> ScriptedModel {
    ScriptedModel::from_json(
        "demo",
        r#"[{"reasoning":"I should look","text":"Let me check.","calls":[{"name":"ls","arguments":{"path":"."}}],
             "usage":{"prompt_tokens":12,"completion_tokens":5}},
            {"text":"There are two files."}]"#,
    )
    .unwrap()
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "ls".into(),
        description: "List a directory".into(),
        input_schema: json!({"type":"object","properties":{"path":{"type":"string"}}}),
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            ..Default::default()
        },
        output_schema: None,
    }]
}

fn first_request() -> TurnRequest {
    TurnRequest::new(vec![Message::user("what is here?")])
        .system("You are terse.")
        .tools(tools())
        .temperature(0.7)
}

async fn events(stream: TurnStream) -> Vec<Result<TurnEvent, ProviderError>> {
    tokio::time::timeout(Duration::from_secs(10), stream.collect())
        .await
        .unwrap()
}

/// Run the two-turn conversation against `model`, returning both turns' events
/// and the requests sent.
async fn converse(
    model: &dyn ChatModel,
) -> (Vec<Vec<Result<TurnEvent, ProviderError>>>, TurnRequest) {
    let first = first_request();
    let one = events(model.turn(first.clone(), CancellationToken::new())).await;
    let mut turn = lrg_providers::AssistantTurn::default();
    for e in one.iter().flatten() {
        turn.push(e.clone());
    }
    let call = turn.tool_calls()[0].clone();
    let mut second = first;
    second.messages.push(turn.into_message());
    second
        .messages
        .push(Message::tool_results([ToolResult::text(
            &call,
            "a.txt\nb.txt",
            false,
        )]));
    let two = events(model.turn(second.clone(), CancellationToken::new())).await;
    (vec![one, two], second)
}

#[tokio::test]
async fn a_recorded_run_replays_identically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let recorder = RecordingModel::create(script(), &path).unwrap();
    let (recorded, _) = converse(&recorder).await;
    assert!(recorded.iter().flatten().all(Result::is_ok));

    let saved = Recording::load(&path).unwrap();
    assert_eq!(saved, recorder.recording());
    assert_eq!(saved.version, RECORDING_VERSION);
    assert_eq!(saved.model.provider, "script");
    assert_eq!(saved.exchanges.len(), 2);
    assert!(
        saved
            .exchanges
            .iter()
            .all(|x| x.complete && x.error.is_none())
    );
    assert_eq!(saved.exchanges[0].request["system"], "You are terse.");
    // The f32 temperature is kept as written, not widened to 0.699999988...
    assert_eq!(saved.exchanges[0].request["temperature"], json!(0.7));

    let replay = ReplayModel::from_file(&path).unwrap();
    assert_eq!(replay.info().provider, "script");
    assert_eq!(replay.info().sends_to, None);
    let (replayed, _) = converse(&replay).await;
    assert_eq!(replayed, recorded);
    assert_eq!(replay.remaining(), 0);
}

#[tokio::test]
async fn a_changed_request_fails_with_a_unified_diff() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let recorder = RecordingModel::create(script(), &path).unwrap();
    converse(&recorder).await;

    let replay = ReplayModel::from_file(&path).unwrap();
    let mut changed = first_request();
    changed.messages = vec![Message::user("what is there?")].into();
    let got = events(replay.turn(changed, CancellationToken::new())).await;
    assert_eq!(got.len(), 1, "only the error: {got:?}");
    let err = got.into_iter().next().unwrap().unwrap_err();
    assert!(!err.is_transient(), "a mismatch must not be retried");
    let msg = err.to_string();
    assert!(msg.contains("request 1 differs"), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(
        msg.contains("--- recorded request\n+++ request now\n"),
        "{msg}"
    );
    assert!(
        msg.contains("\n-          \"text\": \"what is here?\",\n"),
        "{msg}"
    );
    assert!(
        msg.contains("\n+          \"text\": \"what is there?\",\n"),
        "{msg}"
    );
    // Unchanged lines far from the change are left out.
    assert!(!msg.contains("List a directory"), "{msg}");
}

#[tokio::test]
async fn a_changed_tool_set_fails_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let recorder = RecordingModel::create(script(), &path).unwrap();
    converse(&recorder).await;
    let replay = ReplayModel::from_file(&path).unwrap();
    let mut changed = first_request();
    let mut tools = changed.tools.to_vec();
    tools[0].annotations.destructive_hint = Some(true);
    changed.tools = tools.into();
    let err = collect_turn(replay.turn(changed, CancellationToken::new()))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("\n+        \"destructiveHint\": true,\n"),
        "{err}"
    );
}

#[tokio::test]
async fn running_past_the_recording_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let recorder = RecordingModel::create(script(), &path).unwrap();
    let (_, second) = converse(&recorder).await;
    let replay = ReplayModel::from_file(&path).unwrap();
    converse(&replay).await;
    let err = collect_turn(replay.turn(second, CancellationToken::new()))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("holds 2 model turn(s) and turn 3 was requested"),
        "{err}"
    );
}

#[tokio::test]
async fn errors_are_recorded_and_replayed_with_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let model = ScriptedModel::from_json(
        "e",
        r#"[{"error":{"transient":true,"message":"overloaded"}},
            {"error":{"transient":false,"message":"gone for good"}}]"#,
    )
    .unwrap();
    let recorder = RecordingModel::create(model, &path).unwrap();
    let req = first_request();
    let a = collect_turn(recorder.turn(req.clone(), CancellationToken::new()))
        .await
        .unwrap_err();
    let b = collect_turn(recorder.turn(req.clone(), CancellationToken::new()))
        .await
        .unwrap_err();

    let saved = Recording::load(&path).unwrap();
    assert_eq!(
        saved.exchanges[0].error.as_ref().unwrap().kind.as_str(),
        "transient"
    );
    assert_eq!(
        saved.exchanges[1].error.as_ref().unwrap().message,
        "gone for good"
    );

    let replay = ReplayModel::from_file(&path).unwrap();
    let ra = collect_turn(replay.turn(req.clone(), CancellationToken::new()))
        .await
        .unwrap_err();
    let rb = collect_turn(replay.turn(req, CancellationToken::new()))
        .await
        .unwrap_err();
    assert_eq!((ra, rb), (a, b));
}

#[tokio::test]
async fn a_turn_cut_short_keeps_what_was_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let model =
        ScriptedModel::from_json("slow", r#"[{"text":"one two three four","delay_ms":20}]"#)
            .unwrap();
    let recorder = RecordingModel::create(model, &path).unwrap();
    let mut stream = recorder.turn(first_request(), CancellationToken::new());

    // The request is on disk before any answer arrives.
    let saved = Recording::load(&path).unwrap();
    assert_eq!(saved.exchanges.len(), 1);
    assert!(!saved.exchanges[0].complete);

    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, TurnEvent::TextDelta { text: "one".into() });
    drop(stream);

    let saved = Recording::load(&path).unwrap();
    assert_eq!(saved.exchanges[0].events, vec![first.clone()]);
    assert!(!saved.exchanges[0].complete);
    // And it replays what was seen.
    let replay = ReplayModel::from_file(&path).unwrap();
    let got = events(replay.turn(first_request(), CancellationToken::new())).await;
    assert_eq!(got, vec![Ok(first)]);
}

#[tokio::test]
async fn replay_honours_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let recorder = RecordingModel::create(script(), &path).unwrap();
    converse(&recorder).await;
    let replay = ReplayModel::from_file(&path).unwrap();
    let cancel = CancellationToken::new();
    let mut stream = replay.turn(first_request(), cancel.clone());
    assert!(matches!(
        stream.next().await,
        Some(Ok(TurnEvent::ReasoningDelta { .. }))
    ));
    cancel.cancel();
    assert_eq!(
        stream.next().await,
        Some(Ok(TurnEvent::End {
            stop: StopReason::Cancelled
        }))
    );
    assert!(stream.next().await.is_none());
}

#[test]
fn bad_files_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.json");
    let err = |text: &str| {
        std::fs::write(&p, text).unwrap();
        ReplayModel::from_file(&p).unwrap_err().to_string()
    };
    assert!(err("not json").contains("not JSON"));
    assert!(err(r#"[{"text":"hi"}]"#).contains("is this a recording written by `--record`?"));
    assert!(
        err(r#"{"format":"lrg-recording","version":9}"#)
            .contains("version 9 is not supported; this lrg reads version 1")
    );
    assert!(err(r#"{"format":"lrg-recording","version":1}"#).contains("missing field `model`"));
    let missing = ReplayModel::from_file(dir.path().join("nope.json"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("nope.json"), "{missing}");
    let unwritable =
        RecordingModel::create(script(), dir.path().join("no/such/dir/r.json")).unwrap_err();
    assert!(
        unwritable.to_string().contains("no/such/dir/r.json"),
        "{unwritable}"
    );
    // As a ProviderError it is a configuration problem.
    assert!(matches!(
        ProviderError::from(unwritable),
        ProviderError::Config { .. }
    ));
}

fn triage() -> lrg_providers::typed::OutputSchema {
    lrg_providers::typed::OutputSchema::new(json!({
        "title": "triage",
        "type": "object",
        "properties": {"label": {"enum": ["bug", "feature"]}},
        "required": ["label"]
    }))
    .unwrap()
}

#[tokio::test]
async fn a_typed_request_records_its_schema_and_replays() {
    use lrg_providers::typed::OutputMode;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typed.json");
    let script = ScriptedModel::from_json("demo", r#"[{"text":"{\"label\":\"bug\"}"}]"#).unwrap();
    assert_eq!(script.info().output_mode, OutputMode::Prompted);
    let recorder = RecordingModel::create(script, &path).unwrap();
    let request = TurnRequest::new(vec![Message::user("triage: it crashes")]).output(triage());
    let recorded = events(recorder.turn(request.clone(), CancellationToken::new())).await;

    let saved = Recording::load(&path).unwrap();
    assert_eq!(
        saved.exchanges[0].request["output"],
        json!({"name": "triage", "schema": {
            "title": "triage", "type": "object",
            "properties": {"label": {"enum": ["bug", "feature"]}}, "required": ["label"]
        }})
    );
    assert_eq!(saved.model.output_mode, OutputMode::Prompted);
    // The request, schema included, reads back as it was sent.
    let back: TurnRequest = serde_json::from_value(saved.exchanges[0].request.clone()).unwrap();
    assert_eq!(back, request);

    let replay = ReplayModel::from_file(&path).unwrap();
    let replayed = events(replay.turn(request.clone(), CancellationToken::new())).await;
    assert_eq!(replayed, recorded);
    // Another schema is another request.
    let replay = ReplayModel::from_file(&path).unwrap();
    let other = request.output(triage().named("other").unwrap());
    let got = events(replay.turn(other, CancellationToken::new())).await;
    assert!(
        matches!(&got[..], [Err(ProviderError::Other { .. })]),
        "{got:?}"
    );
}

#[test]
fn a_replay_says_the_recorded_models_output_mode() {
    use lrg_providers::typed::OutputMode;
    use lrg_providers::{ModelInfo, ModelLocation};
    // The session shapes a typed request by the mode (instructions only for
    // a prompted model), so a replay must report the recorded one to see
    // the same requests again.
    let info = ModelInfo::new("openai", "gpt-4.1", ModelLocation::Cloud)
        .output_mode(OutputMode::NativeStrict);
    let replay = ReplayModel::new(Recording::new(info.clone()), "typed.json");
    assert_eq!(replay.info().output_mode, OutputMode::NativeStrict);
    // A recording from before output modes reads as prompted.
    let mut old = serde_json::to_value(&info).unwrap();
    old.as_object_mut().unwrap().remove("output_mode");
    let old: ModelInfo = serde_json::from_value(old).unwrap();
    assert_eq!(old.output_mode, OutputMode::Prompted);
}
