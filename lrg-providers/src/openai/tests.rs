//! Decoder unit tests: tool-call fragment joining across server quirks, and
//! garbage frames that must give errors, never panics.

use serde_json::json;

use super::*;
use crate::endpoint::sends_to;
use crate::wire::{Decoder, Frame};
use crate::{Message, Part, StopReason, ToolCall, TurnEvent, Usage};

fn frame(data: &str) -> Frame {
    Frame {
        event: None,
        data: data.to_string(),
    }
}

fn decode_all(
    decoder: &mut OpenAiDecoder,
    frames: &[String],
) -> Result<Vec<TurnEvent>, crate::ProviderError> {
    let mut out = Vec::new();
    for f in frames {
        decoder.decode(&frame(f), &mut out)?;
    }
    decoder.finish(&mut out)?;
    Ok(out)
}

fn run(frames: &[serde_json::Value]) -> Result<Vec<TurnEvent>, crate::ProviderError> {
    let mut frames: Vec<String> = frames.iter().map(|v| v.to_string()).collect();
    frames.push("[DONE]".into());
    decode_all(
        &mut OpenAiDecoder::new(Dialect::GENERIC.reasoning_fields, &[]),
        &frames,
    )
}

fn calls(events: &[TurnEvent]) -> Vec<ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

fn tc(calls: serde_json::Value) -> serde_json::Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]})
}

fn finish(reason: &str) -> serde_json::Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

#[test]
fn fragments_joined_by_index_two_calls_interleaved() {
    let events = run(&[
        tc(json!([{"index": 0, "id": "call_a", "type": "function", "function": {"name": "search", "arguments": ""}}])),
        tc(json!([{"index": 1, "id": "call_b", "type": "function", "function": {"name": "open", "arguments": "{\"pa"}}])),
        tc(json!([{"index": 0, "function": {"arguments": "{\"q\":"}}])),
        tc(json!([{"index": 1, "function": {"arguments": "th\":\"/x\"}"}}])),
        tc(json!([{"index": 0, "function": {"arguments": "\"cats\"}"}}])),
        finish("tool_calls"),
    ])
    .unwrap();
    assert_eq!(
        calls(&events),
        vec![
            ToolCall {
                id: "call_a".into(),
                name: "search".into(),
                arguments: json!({"q": "cats"})
            },
            ToolCall {
                id: "call_b".into(),
                name: "open".into(),
                arguments: json!({"path": "/x"})
            },
        ]
    );
    assert_eq!(
        events.last(),
        Some(&TurnEvent::End {
            stop: StopReason::ToolCalls
        })
    );
}

#[test]
fn server_without_index_repeating_id_and_name() {
    let events = run(&[
        tc(json!([{"id": "c1", "function": {"name": "search", "arguments": "{\"q\""}}])),
        tc(json!([{"id": "c1", "function": {"name": "search", "arguments": ":\"a\"}"}}])),
        tc(json!([{"id": "c2", "function": {"name": "open", "arguments": "{}"}}])),
        finish("stop"),
    ])
    .unwrap();
    let got = calls(&events);
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[0].name.as_str(), &got[0].arguments),
        ("search", &json!({"q": "a"}))
    );
    assert_eq!((got[1].id.as_str(), got[1].name.as_str()), ("c2", "open"));
    // "stop" after tool calls still means the model wants them run.
    assert_eq!(
        events.last(),
        Some(&TurnEvent::End {
            stop: StopReason::ToolCalls
        })
    );
}

#[test]
fn no_index_no_id_continues_the_last_open_call_and_ids_are_made_up() {
    let history = vec![Message {
        role: crate::Role::Assistant,
        parts: vec![Part::ToolCall(ToolCall {
            id: "call_1".into(),
            name: "x".into(),
            arguments: json!({}),
        })],
    }];
    let frames: Vec<String> = [
        tc(json!([{"function": {"name": "search", "arguments": "{\"q\":"}}])),
        tc(json!([{"function": {"arguments": "1}"}}])),
        finish("tool_calls"),
    ]
    .iter()
    .map(|v| v.to_string())
    .collect();
    let events = decode_all(&mut OpenAiDecoder::new(&[], &history), &frames).unwrap();
    let got = calls(&events);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].arguments, json!({"q": 1}));
    assert!(
        got[0].id.starts_with("call_") && got[0].id != "call_1",
        "{}",
        got[0].id
    );
}

#[test]
fn every_call_numbered_zero_with_distinct_ids_are_separate_calls() {
    let events = run(&[
        tc(json!([{"index": 0, "id": "a", "function": {"name": "one", "arguments": "{}"}}])),
        tc(json!([{"index": 0, "id": "b", "function": {"name": "two", "arguments": "{\"k\":"}}])),
        tc(json!([{"index": 0, "function": {"arguments": "2}"}}])),
        finish("tool_calls"),
    ])
    .unwrap();
    let got = calls(&events);
    assert_eq!(
        got.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["one", "two"]
    );
    assert_eq!(got[1].arguments, json!({"k": 2}));
}

#[test]
fn arguments_as_an_object_and_double_encoded() {
    let events = run(&[
        tc(json!([{"index": 0, "id": "a", "function": {"name": "one", "arguments": {"x": [1, 2]}}}])),
        tc(json!([{"index": 1, "id": "b", "function": {"name": "two", "arguments": "\"{\\\"y\\\":true}\""}}])),
        finish("tool_calls"),
    ])
    .unwrap();
    let got = calls(&events);
    assert_eq!(got[0].arguments, json!({"x": [1, 2]}));
    assert_eq!(got[1].arguments, json!({"y": true}));
}

#[test]
fn duplicate_server_ids_are_replaced() {
    let events = run(&[
        tc(json!([{"index": 0, "id": "same", "function": {"name": "one", "arguments": "{}"}}])),
        tc(json!([{"index": 1, "id": "same", "function": {"name": "two", "arguments": "{}"}}])),
        finish("tool_calls"),
    ])
    .unwrap();
    let got = calls(&events);
    assert_eq!(got[0].id, "same");
    assert_ne!(got[1].id, "same");
}

#[test]
fn malformed_arguments_name_the_tool() {
    let err = run(&[tc(json!([{"index": 0, "id": "a", "function": {"name": "search", "arguments": "{\"q\": nope"}}])), finish("tool_calls")])
        .unwrap_err();
    assert!(
        matches!(err, crate::ProviderError::Protocol { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("`search`"), "{err}");
    let cut = run(&[tc(json!([{"index": 0, "id": "a", "function": {"name": "search", "arguments": "{\"q\": \"ca"}}])), finish("length")])
        .unwrap_err();
    assert!(cut.to_string().contains("token limit"), "{cut}");
}

#[test]
fn reasoning_fields_follow_the_dialect_and_are_not_doubled() {
    let both =
        json!({"choices": [{"delta": {"reasoning_content": "think", "reasoning": "think"}}]});
    let events = run(&[
        both.clone(),
        json!({"choices": [{"delta": {"content": "hi"}}]}),
        finish("stop"),
    ])
    .unwrap();
    assert_eq!(
        events[..2],
        [
            TurnEvent::ReasoningDelta {
                text: "think".into()
            },
            TurnEvent::TextDelta { text: "hi".into() }
        ]
    );
    let mut openai = OpenAiDecoder::new(Dialect::OPENAI.reasoning_fields, &[]);
    let events = decode_all(&mut openai, &[both.to_string(), finish("stop").to_string()]).unwrap();
    assert_eq!(
        events,
        [TurnEvent::End {
            stop: StopReason::EndTurn
        }]
    );
    let mut ollama = OpenAiDecoder::new(Dialect::OLLAMA_V1.reasoning_fields, &[]);
    let only = json!({"choices": [{"delta": {"reasoning": "r"}}]});
    let events = decode_all(&mut ollama, &[only.to_string(), finish("stop").to_string()]).unwrap();
    assert_eq!(events[0], TurnEvent::ReasoningDelta { text: "r".into() });
}

#[test]
fn usage_unknown_finish_reason_and_whole_reply() {
    let events = run(&[
        json!({"choices": [{"delta": {"content": "a"}, "finish_reason": "eos_token_reached"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}),
    ])
    .unwrap();
    assert_eq!(
        events,
        [
            TurnEvent::TextDelta { text: "a".into() },
            TurnEvent::Usage(Usage::new(12, 3)),
            TurnEvent::End {
                stop: StopReason::Other("eos_token_reached".into())
            },
        ]
    );
    // A non-streamed reply, fed as one frame, with no [DONE] after it.
    let whole = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7}
    });
    let events = decode_all(&mut OpenAiDecoder::new(&[], &[]), &[whole.to_string()]).unwrap();
    assert_eq!(
        events,
        [
            TurnEvent::ToolCallDelta {
                index: 0,
                id: Some("call_9".into()),
                name: Some("f".into()),
                arguments_fragment: r#"{"a":1}"#.into(),
            },
            TurnEvent::ToolCall(ToolCall {
                id: "call_9".into(),
                name: "f".into(),
                arguments: json!({"a": 1})
            }),
            TurnEvent::Usage(Usage::new(5, 7)),
            TurnEvent::End {
                stop: StopReason::ToolCalls
            },
        ]
    );
}

/// The usage chunk as OpenAI documents it (`stream_options.include_usage`),
/// and DeepSeek's name for the cached part.
#[test]
fn usage_details_give_cached_and_reasoning_tokens() {
    let openai = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": {
        "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 192, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    }});
    let deepseek = json!({"choices": [], "usage": {
        "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
        "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36,
        "completion_tokens_details": {"reasoning_tokens": 12}
    }});
    // A server that sends the details as null says nothing about them.
    let bare = json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1,
        "prompt_tokens_details": null, "completion_tokens_details": null}});
    let usages: Vec<_> = [openai, deepseek, bare]
        .iter()
        .map(|chunk| {
            let events = run(&[chunk.clone(), finish("stop")]).unwrap();
            match &events[0] {
                TurnEvent::Usage(usage) => *usage,
                other => panic!("expected usage, got {other:?}"),
            }
        })
        .collect();
    assert_eq!(
        usages,
        [
            Usage::new(2006, 300)
                .with_cached_prompt_tokens(1920)
                .with_reasoning_tokens(192),
            Usage::new(100, 20)
                .with_cached_prompt_tokens(64)
                .with_reasoning_tokens(12),
            Usage::new(5, 1),
        ]
    );
}

#[test]
fn end_of_stream_without_done_or_finish_is_transient() {
    let mut d = OpenAiDecoder::new(&[], &[]);
    let mut out = Vec::new();
    d.decode(
        &frame(&json!({"choices": [{"delta": {"content": "par"}}]}).to_string()),
        &mut out,
    )
    .unwrap();
    let err = d.finish(&mut out).unwrap_err();
    assert!(err.is_transient(), "{err:?}");
}

#[test]
fn mid_stream_errors_are_classified() {
    let mut d = OpenAiDecoder::new(&[], &[]);
    let mut out = Vec::new();
    let err = d
        .decode(
            &frame(r#"{"error":{"message":"error parsing tool call: raw='{'","code":500}}"#),
            &mut out,
        )
        .unwrap_err();
    assert!(err.is_transient());
    let err = d
        .decode(
            &frame(r#"{"error":{"message":"This model's maximum context length is 4096 tokens"}}"#),
            &mut out,
        )
        .unwrap_err();
    assert!(matches!(err, crate::ProviderError::ContextOverflow { .. }));
    // A frame cut inside its JSON is a cut stream; a garbled one is protocol.
    let cut = d
        .decode(&frame(r#"{"choices":[{"delta":{"content":"ab"#), &mut out)
        .unwrap_err();
    assert!(cut.is_transient(), "{cut:?}");
    let bad = d
        .decode(&frame(r#"{"choices": nope}"#), &mut out)
        .unwrap_err();
    assert!(
        matches!(bad, crate::ProviderError::Protocol { .. }),
        "{bad:?}"
    );
}

#[test]
fn garbage_frames_give_errors_never_panics() {
    let valid = [
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "he\"llo", "reasoning_content": "r"}}]}).to_string(),
        tc(json!([{"index": 0, "id": "c", "function": {"name": "n", "arguments": "{\"a\":[1,{\"b\":null}]}"}}])).to_string(),
        finish("tool_calls").to_string(),
        json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}).to_string(),
    ];
    let odd = [
        "[DONE]",
        "null",
        "42",
        "\"s\"",
        "[]",
        "{}",
        "{\"choices\":null}",
        "{\"choices\":[null]}",
        "{\"choices\":[{\"delta\":7}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":{}}}]}",
        "{\"usage\":{\"prompt_tokens\":-5}}",
        "{\"usage\":{\"prompt_tokens\":99999999999999}}",
        "\u{0}\u{1}",
        "{\"error\":null}",
        "{\"choices\":[{\"delta\":{\"content\":[{\"text\":\"x\"}],\"reasoning\":{\"effort\":\"low\"}}}]}",
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3_000 {
        let mut frames = Vec::new();
        for _ in 0..(next() % 6) {
            let pick = next() as usize;
            let f = if pick.is_multiple_of(3) {
                odd[pick % odd.len()].to_string()
            } else {
                // A valid frame, truncated or with one byte flipped.
                let mut bytes = valid[pick % valid.len()].clone().into_bytes();
                let at = next() as usize % bytes.len();
                if pick.is_multiple_of(2) {
                    bytes.truncate(at);
                } else {
                    bytes[at] = (next() % 128) as u8;
                }
                String::from_utf8_lossy(&bytes).into_owned()
            };
            frames.push(f);
        }
        let mut d = OpenAiDecoder::new(Dialect::GENERIC.reasoning_fields, &[]);
        let _ = decode_all(&mut d, &frames);
    }
}

#[test]
fn sends_to_is_none_for_this_machine() {
    assert_eq!(
        sends_to("https://api.openai.com/v1").as_deref(),
        Some("api.openai.com")
    );
    assert_eq!(
        sends_to("http://gpu-box.lan:8000/v1").as_deref(),
        Some("gpu-box.lan")
    );
    for local in [
        "http://localhost:1234/v1",
        "http://127.0.0.1:8080/v1",
        "http://[::1]:8000/v1",
        "http://0.0.0.0:11434",
    ] {
        assert_eq!(sends_to(local), None, "{local}");
    }
}

#[test]
fn missing_key_and_bad_url_are_config_errors() {
    let err = OpenAiChat::new(OpenAiConfig::new(
        Dialect::OPENAI,
        "https://api.openai.com/v1",
        "gpt-4.1",
    ))
    .unwrap_err();
    assert!(matches!(err, crate::ProviderError::Config { .. }));
    assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
    let err =
        OpenAiChat::new(OpenAiConfig::new(Dialect::GENERIC, "localhost:8000", "m")).unwrap_err();
    assert!(err.to_string().contains("invalid base URL"), "{err}");
    assert!(
        OpenAiChat::new(OpenAiConfig::new(
            Dialect::VLLM,
            "http://localhost:8000/v1",
            "m"
        ))
        .is_ok()
    );
}

#[test]
fn model_list_reads_context_windows() {
    let list = json!({"object": "list", "data": [
        {"id": "a", "object": "model", "max_model_len": 32768},
        {"id": "b", "meta": {"n_ctx_train": 8192}},
        {"id": "c"},
        {"no_id": true}
    ]});
    let models = parse_models(&list, &Dialect::VLLM, None).unwrap();
    let got: Vec<_> = models
        .iter()
        .map(|m| (m.model.as_str(), m.context_window))
        .collect();
    assert_eq!(got, [("a", Some(32768)), ("b", Some(8192)), ("c", None)]);
    assert!(
        models
            .iter()
            .all(|m| m.output_mode == crate::typed::OutputMode::Native)
    );
    let deepseek = parse_models(&list, &Dialect::DEEPSEEK, None).unwrap();
    assert_eq!(deepseek[0].output_mode, crate::typed::OutputMode::Prompted);
    assert!(parse_models(&json!({"models": []}), &Dialect::VLLM, None).is_err());
}
