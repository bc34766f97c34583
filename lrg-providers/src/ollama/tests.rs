//! Decoder, `OLLAMA_HOST` and model-list unit tests.

use serde_json::json;

use super::models::{parse_context_length, parse_tags};
use super::*;
use crate::wire::{Decoder, Frame};
use crate::{Message, Part, Role, StopReason, ToolCall, TurnEvent, Usage};

fn decode_all(
    decoder: &mut OllamaDecoder,
    lines: &[String],
) -> Result<Vec<TurnEvent>, ProviderError> {
    let mut out = Vec::new();
    for l in lines {
        decoder.decode(
            &Frame {
                event: None,
                data: l.clone(),
            },
            &mut out,
        )?;
    }
    decoder.finish(&mut out)?;
    Ok(out)
}

fn lines(values: &[serde_json::Value]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

fn msg(message: serde_json::Value) -> serde_json::Value {
    json!({"model": "qwen3:8b", "created_at": "2025-01-01T00:00:00Z", "message": message, "done": false})
}

#[test]
fn thinking_text_calls_usage_in_order() {
    let history = vec![Message {
        role: Role::Assistant,
        parts: vec![Part::ToolCall(ToolCall {
            id: "call_1".into(),
            name: "x".into(),
            arguments: json!({}),
        })],
    }];
    let events = decode_all(
        &mut OllamaDecoder::new(&history),
        &lines(&[
            msg(json!({"role": "assistant", "content": "", "thinking": "hmm"})),
            msg(json!({"role": "assistant", "content": "ok"})),
            msg(json!({"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "search", "arguments": {"q": "cats"}}},
                {"function": {"index": 1, "name": "open", "arguments": {"path": "/a"}}}
            ]})),
            json!({"model": "qwen3:8b", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
                   "total_duration": 1, "prompt_eval_count": 26, "eval_count": 290}),
        ]),
    )
    .unwrap();
    assert_eq!(
        events,
        [
            TurnEvent::ReasoningDelta { text: "hmm".into() },
            TurnEvent::TextDelta { text: "ok".into() },
            TurnEvent::ToolCallDelta {
                index: 0,
                id: Some("call_2".into()),
                name: Some("search".into()),
                arguments_fragment: r#"{"q":"cats"}"#.into(),
            },
            TurnEvent::ToolCall(ToolCall {
                id: "call_2".into(),
                name: "search".into(),
                arguments: json!({"q": "cats"})
            }),
            TurnEvent::ToolCallDelta {
                index: 1,
                id: Some("call_3".into()),
                name: Some("open".into()),
                arguments_fragment: r#"{"path":"/a"}"#.into(),
            },
            TurnEvent::ToolCall(ToolCall {
                id: "call_3".into(),
                name: "open".into(),
                arguments: json!({"path": "/a"})
            }),
            TurnEvent::Usage(Usage::new(26, 290)),
            TurnEvent::End {
                stop: StopReason::ToolCalls
            },
        ]
    );
}

#[test]
fn server_ids_kept_string_arguments_parsed_length_and_unknown_reasons() {
    let events = decode_all(
        &mut OllamaDecoder::new(&[]),
        &lines(&[
            msg(json!({"content": "", "tool_calls": [{"id": "call_abc", "function": {"name": "f", "arguments": "{\"a\":1}"}}]})),
            json!({"done": true, "done_reason": "length"}),
        ]),
    )
    .unwrap();
    assert_eq!(
        events[1],
        TurnEvent::ToolCall(ToolCall {
            id: "call_abc".into(),
            name: "f".into(),
            arguments: json!({"a": 1})
        })
    );
    assert_eq!(
        events[2],
        TurnEvent::End {
            stop: StopReason::MaxTokens
        }
    );
    let events = decode_all(
        &mut OllamaDecoder::new(&[]),
        &lines(&[json!({"done": true, "done_reason": "unload"})]),
    )
    .unwrap();
    assert_eq!(
        events,
        [TurnEvent::End {
            stop: StopReason::Other("unload".into())
        }]
    );
}

#[test]
fn faults() {
    let cut = decode_all(
        &mut OllamaDecoder::new(&[]),
        &lines(&[msg(json!({"content": "par"}))]),
    )
    .unwrap_err();
    assert!(cut.is_transient(), "{cut:?}");
    let err = decode_all(
        &mut OllamaDecoder::new(&[]),
        &[r#"{"error":"error parsing tool call: raw='{\"a'"}"#.to_string()],
    )
    .unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("error parsing tool call"),
        "{err}"
    );
    let bad = decode_all(&mut OllamaDecoder::new(&[]), &["{nope}".to_string()]).unwrap_err();
    assert!(matches!(bad, ProviderError::Protocol { .. }), "{bad:?}");
    let nameless = decode_all(
        &mut OllamaDecoder::new(&[]),
        &lines(&[msg(
            json!({"tool_calls": [{"function": {"arguments": {}}}]}),
        )]),
    )
    .unwrap_err();
    assert!(
        nameless.to_string().contains("without a tool name"),
        "{nameless}"
    );
    let bad_args = decode_all(
        &mut OllamaDecoder::new(&[]),
        &lines(&[msg(
            json!({"tool_calls": [{"function": {"name": "grep", "arguments": "{oops"}}]}),
        )]),
    )
    .unwrap_err();
    assert!(bad_args.to_string().contains("`grep`"), "{bad_args}");
}

#[test]
fn garbage_lines_give_errors_never_panics() {
    let valid = [
        msg(json!({"role": "assistant", "content": "h\"i", "thinking": "t"})).to_string(),
        msg(json!({"tool_calls": [{"function": {"name": "n", "arguments": {"a": [1, null]}}}]}))
            .to_string(),
        json!({"done": true, "done_reason": "stop", "prompt_eval_count": 1, "eval_count": 2})
            .to_string(),
    ];
    let odd = [
        "null",
        "[]",
        "1",
        "{\"message\":7}",
        "{\"message\":{\"tool_calls\":{}}}",
        "{\"done\":\"yes\"}",
        "{\"eval_count\":-1,\"done\":true}",
    ];
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3_000 {
        let mut frames = Vec::new();
        for _ in 0..(next() % 5) {
            let pick = next() as usize;
            if pick.is_multiple_of(3) {
                frames.push(odd[pick % odd.len()].to_string());
                continue;
            }
            let mut bytes = valid[pick % valid.len()].clone().into_bytes();
            let at = next() as usize % bytes.len();
            if pick.is_multiple_of(2) {
                bytes.truncate(at);
            } else {
                bytes[at] = (next() % 128) as u8;
            }
            frames.push(String::from_utf8_lossy(&bytes).into_owned());
        }
        let _ = decode_all(&mut OllamaDecoder::new(&[]), &frames);
    }
}

#[test]
fn ollama_host_forms() {
    let cases = [
        ("localhost:11434", "http://localhost:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:8080", "http://127.0.0.1:8080"),
        (":11434", "http://127.0.0.1:11434"),
        ("gpu-box", "http://gpu-box:11434"),
        ("http://gpu-box", "http://gpu-box:80"),
        (
            "https://ollama.example.com",
            "https://ollama.example.com:443",
        ),
        (
            "https://ollama.example.com:8443/proxy/",
            "https://ollama.example.com:8443/proxy",
        ),
        ("[::1]:11434", "http://[::1]:11434"),
        ("::1", "http://[::1]:11434"),
        ("host:notaport", "http://host:11434"),
        ("  http://10.0.0.5:11434  ", "http://10.0.0.5:11434"),
    ];
    for (input, want) in cases {
        assert_eq!(parse_host(input), want, "{input}");
    }
}

#[test]
fn model_lists() {
    let tags = json!({"models": [{"name": "qwen3:8b", "model": "qwen3:8b", "size": 1}, {"model": "llava:7b"}, {"size": 3}]});
    assert_eq!(parse_tags(&tags).unwrap(), ["qwen3:8b", "llava:7b"]);
    assert!(parse_tags(&json!({"data": []})).is_err());
    let show = json!({"model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960, "clip.context_length": 77}});
    assert_eq!(parse_context_length(&show), Some(40960));
    let show = json!({"model_info": {"llama.context_length": 8192}});
    assert_eq!(parse_context_length(&show), Some(8192));
    assert_eq!(parse_context_length(&json!({"model_info": {}})), None);
    assert_eq!(parse_context_length(&json!({"license": "x"})), None);
}

#[test]
fn a_known_window_is_sent_as_num_ctx() {
    let request = TurnRequest {
        messages: vec![crate::Message::user("hi")].into(),
        ..Default::default()
    };
    let config = OllamaConfig::new(DEFAULT_HOST, "qwen3:8b");
    let body = encode(&request, &config).unwrap();
    assert!(body["options"].get("num_ctx").is_none(), "{body}");
    let body = encode(&request, &config.with_context_window(40_960)).unwrap();
    assert_eq!(body["options"]["num_ctx"], 40_960);
}
