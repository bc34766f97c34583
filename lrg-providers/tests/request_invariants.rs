//! The shared request-invariant matcher (`common::Invariants`) catches what
//! it is for, on hand-built bodies of each API: a result before its call or
//! without one, a call answered twice or never, another API's native part,
//! the key, and a body of the wrong shape; and it panics, naming the
//! invariant, when wiremock asks it about such a request.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use common::{Api, Broken, Invariants};
use serde_json::{Value, json};

const KEY: &str = "sk-invariants-0123456789";

fn check(api: Api, body: Value) -> Result<(), Broken> {
    Invariants::new(api, Some(KEY)).check(body.to_string().as_bytes())
}

fn chat(messages: Value) -> Value {
    json!({"model": "m", "messages": messages})
}

fn call(id: &str) -> Value {
    json!({"role": "assistant", "content": "", "tool_calls": [
        {"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
}

fn result(id: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": "ok"})
}

#[test]
fn chat_bodies_pair_every_call_with_one_later_result() {
    let user = json!({"role": "user", "content": "hi"});
    for api in [Api::OpenAi, Api::Ollama] {
        assert_eq!(
            check(api, chat(json!([user, call("a"), result("a")]))),
            Ok(())
        );
        assert_eq!(
            check(api, chat(json!([user, result("a"), call("a")]))),
            Err(Broken::ResultBeforeCall("a".into()))
        );
        assert_eq!(
            check(api, chat(json!([user, result("x")]))),
            Err(Broken::ResultWithoutCall("x".into()))
        );
        assert_eq!(
            check(
                api,
                chat(json!([user, call("a"), result("a"), result("a")]))
            ),
            Err(Broken::AnsweredTwice("a".into()))
        );
        assert_eq!(
            check(api, chat(json!([user, call("a"), user]))),
            Err(Broken::Unanswered("a".into()))
        );
        assert!(matches!(
            check(api, json!({"model": "m"})),
            Err(Broken::Shape(_))
        ));
        assert!(matches!(
            check(api, chat(json!([{"role": "robot", "content": "x"}]))),
            Err(Broken::Shape(_))
        ));
    }
}

#[test]
fn the_key_and_other_apis_native_parts_are_caught() {
    let user = |content: Value| chat(json!([{"role": "user", "content": content}]));
    assert_eq!(
        check(Api::OpenAi, user(json!(format!("my key is {KEY}")))),
        Err(Broken::KeyInBody)
    );
    assert_eq!(
        check(
            Api::OpenAi,
            user(json!([{"type": "thinking", "thinking": "x", "signature": "s"}]))
        ),
        Err(Broken::ForeignNative("type: thinking"))
    );
    let signed = json!({"contents": [{"role": "model", "parts": [{"text": "x", "thoughtSignature": "c2ln"}]}]});
    assert_eq!(check(Api::Gemini, signed.clone()), Ok(()));
    assert_eq!(
        check(
            Api::Anthropic,
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "assistant", "content": [
                {"type": "text", "text": "x", "thoughtSignature": "c2ln"}]}]})
        ),
        Err(Broken::ForeignNative("thoughtSignature"))
    );
    assert_eq!(
        check(
            Api::Gemini,
            json!({"contents": [{"role": "model", "parts": [{"text": "x", "encrypted_content": "e"}]}]})
        ),
        Err(Broken::ForeignNative("encrypted_content"))
    );
    assert!(matches!(
        check(Api::Gemini, json!("not an object")),
        Err(Broken::Shape(_))
    ));
    assert_eq!(
        Invariants::new(Api::OpenAi, None).check(b"{not json"),
        Err(Broken::NotJson)
    );
}

#[test]
fn anthropic_gemini_and_responses_bodies_pair_their_own_way() {
    let anthropic = |messages: Value| json!({"model": "m", "max_tokens": 64, "messages": messages});
    let tool_use = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "f", "input": {}}]});
    let tool_result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "ok"}]});
    assert_eq!(
        check(Api::Anthropic, anthropic(json!([tool_use, tool_result]))),
        Ok(())
    );
    assert_eq!(
        check(Api::Anthropic, anthropic(json!([tool_result, tool_use]))),
        Err(Broken::ResultBeforeCall("tu_1".into()))
    );
    assert!(matches!(
        check(
            Api::Anthropic,
            json!({"model": "m", "messages": [tool_use, tool_result]})
        ),
        Err(Broken::Shape(_))
    ));

    let gemini_call = |name: &str| json!({"role": "model", "parts": [{"functionCall": {"name": name, "args": {}}}]});
    let gemini_result = |name: &str| json!({"role": "user", "parts": [{"functionResponse": {"name": name, "response": {}}}]});
    assert_eq!(
        check(
            Api::Gemini,
            json!({"contents": [gemini_call("f"), gemini_result("f"), gemini_call("f"), gemini_result("f")]})
        ),
        Ok(())
    );
    assert_eq!(
        check(
            Api::Gemini,
            json!({"contents": [gemini_call("f"), gemini_call("g"), gemini_result("f")]})
        ),
        Err(Broken::Unanswered("g".into()))
    );

    let responses = |input: Value| json!({"model": "m", "input": input});
    let fc = json!({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"});
    let out = json!({"type": "function_call_output", "call_id": "c1", "output": "ok"});
    assert_eq!(check(Api::Responses, responses(json!([fc, out]))), Ok(()));
    assert_eq!(
        check(Api::Responses, responses(json!([out]))),
        Err(Broken::ResultWithoutCall("c1".into()))
    );
    // The call may live in the stored response the request continues.
    let mut tail = responses(json!([out]));
    tail["previous_response_id"] = json!("resp_1");
    assert_eq!(check(Api::Responses, tail), Ok(()));
    assert_eq!(
        check(
            Api::Responses,
            responses(json!([{"type": "reasoning", "encrypted_content": "e"}, fc, out]))
        ),
        Ok(())
    );
}

#[test]
fn the_matcher_panics_naming_the_invariant() {
    use wiremock::Match as _;
    let request = |body: Value| wiremock::Request {
        url: "http://127.0.0.1/v1/chat/completions".parse().unwrap(),
        method: wiremock::http::Method::POST,
        headers: Default::default(),
        body: body.to_string().into_bytes(),
    };
    let matcher = Invariants::new(Api::OpenAi, Some(KEY));
    let good = chat(json!([{"role": "user", "content": "hi"}, call("a"), result("a")]));
    assert!(matcher.matches(&request(good)));
    let bad = chat(json!([{"role": "user", "content": "hi"}, call("a")]));
    let panic = std::panic::catch_unwind(|| matcher.matches(&request(bad))).unwrap_err();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("the tool call `a` has no result"),
        "{message}"
    );
    let leaked = chat(json!([{"role": "user", "content": KEY}]));
    let panic = std::panic::catch_unwind(|| matcher.matches(&request(leaked))).unwrap_err();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("the API key is in the body"), "{message}");
    assert!(!message.contains(KEY), "the panic shows the key: {message}");
}
