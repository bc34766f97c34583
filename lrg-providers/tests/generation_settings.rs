//! Generation settings as each adapter sends them: the same full set of
//! settings encoded for every API, each body snapshotted, so what an API gets
//! (and under which name) and what it is spared (dropped with a debug line,
//! never a refused request) can be read side by side.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use common::LogBuffer;
use lrg_providers::anthropic::AnthropicConfig;
use lrg_providers::gemini::GeminiConfig;
use lrg_providers::ollama::OllamaConfig;
use lrg_providers::openai::{Dialect, OpenAiConfig};
use lrg_providers::responses::{ResponsesConfig, ResponsesHost};
use lrg_providers::{ApiKey, GenerationSettings, Message, TurnRequest};
use serde_json::{Value, json};

/// Every setting, each with a value no adapter uses as its default.
fn all_settings() -> GenerationSettings {
    GenerationSettings::new()
        .temperature(0.4)
        .max_tokens(321)
        .top_p(0.9)
        .top_k(40)
        .seed(42)
        .stop(["END", "STOP", "HALT", "QUIT", "DONE", "OVER"])
}

fn request() -> TurnRequest {
    TurnRequest::new(vec![Message::user("hi")])
        .system("You are terse.")
        .settings(all_settings())
}

fn openai(dialect: Dialect, model: &str) -> Value {
    let config = OpenAiConfig::new(dialect, "http://127.0.0.1:9/v1", model);
    lrg_providers::openai::encode(&request(), &config).unwrap()
}

fn responses(host: ResponsesHost, model: &str) -> Value {
    let config = ResponsesConfig::new(host, "http://127.0.0.1:9/v1", model);
    lrg_providers::responses::encode(&request(), &config).unwrap()
}

#[test]
fn openai_chat_sends_every_setting_to_a_chat_model() {
    let body = openai(Dialect::OPENAI, "gpt-4.1");
    // max_completion_tokens, and at most four stop sequences.
    insta::assert_json_snapshot!("openai_chat_settings", body);
}

#[test]
fn openai_reasoning_models_get_no_sampling_settings() {
    for model in ["o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini"] {
        let body = openai(Dialect::OPENAI, model);
        for dropped in ["temperature", "top_p", "stop", "max_tokens"] {
            assert!(body.get(dropped).is_none(), "{model}: {dropped} in {body}");
        }
        assert_eq!(body["max_completion_tokens"], 321, "{model}");
        assert_eq!(body["seed"], 42, "{model}");
    }
    insta::assert_json_snapshot!(
        "openai_reasoning_settings",
        openai(Dialect::OPENAI, "o4-mini")
    );
}

#[test]
fn servers_get_max_tokens_and_every_stop_sequence() {
    for dialect in [
        Dialect::LMSTUDIO,
        Dialect::VLLM,
        Dialect::LLAMA_CPP,
        Dialect::OLLAMA_V1,
    ] {
        let body = openai(dialect, "qwen3-8b");
        assert_eq!(body["max_tokens"], 321, "{}", dialect.name);
        assert_eq!(
            body["stop"].as_array().unwrap().len(),
            6,
            "{}",
            dialect.name
        );
    }
    insta::assert_json_snapshot!("lmstudio_settings", openai(Dialect::LMSTUDIO, "qwen3-8b"));
}

#[test]
fn top_k_goes_to_the_servers_that_take_it_and_never_to_openai() {
    for dialect in [
        Dialect::VLLM,
        Dialect::LLAMA_CPP,
        Dialect::LMSTUDIO,
        Dialect::GENERIC,
        Dialect::OPENROUTER,
        Dialect::TOGETHER,
    ] {
        let body = openai(dialect, "qwen3-8b");
        assert_eq!(body["top_k"], 40, "{}", dialect.name);
    }
    for (dialect, model) in [
        (Dialect::OPENAI, "gpt-4.1"),
        (Dialect::OPENAI, "o4-mini"),
        (Dialect::OLLAMA_V1, "qwen3:8b"),
        (Dialect::MISTRAL, "mistral-large-latest"),
        (Dialect::GROQ, "llama-3.3-70b-versatile"),
        (Dialect::DEEPSEEK, "deepseek-chat"),
    ] {
        let body = openai(dialect, model);
        assert!(body.get("top_k").is_none(), "{}: {body}", dialect.name);
    }
    let body = responses(ResponsesHost::OPENAI, "gpt-4.1");
    assert!(body.get("top_k").is_none(), "{body}");
}

#[test]
fn mistral_takes_its_seed_as_random_seed() {
    let body = openai(Dialect::MISTRAL, "mistral-large-latest");
    assert_eq!(body["random_seed"], 42);
    assert!(body.get("seed").is_none(), "{body}");
    assert_eq!(body["max_tokens"], 321);
}

#[test]
fn responses_api_sends_max_output_tokens_and_no_seed_or_stop() {
    insta::assert_json_snapshot!(
        "responses_settings",
        responses(ResponsesHost::OPENAI, "gpt-4.1")
    );
    let reasoning = responses(ResponsesHost::OPENAI, "o4-mini");
    for dropped in ["temperature", "top_p", "seed", "stop"] {
        assert!(reasoning.get(dropped).is_none(), "{dropped} in {reasoning}");
    }
    assert_eq!(reasoning["max_output_tokens"], 321);
}

#[test]
fn anthropic_sends_stop_sequences_and_no_seed() {
    let config = AnthropicConfig::new("claude-sonnet-4-5", ApiKey::new("sk-ant-test"));
    let body = lrg_providers::anthropic::encode(&request(), &config).unwrap();
    // A temperature and a top_p together are refused by newer models: the
    // temperature goes.
    insta::assert_json_snapshot!("anthropic_settings", body);

    let only_top_p = request().settings(GenerationSettings::new().top_p(0.5));
    let body = lrg_providers::anthropic::encode(&only_top_p, &config).unwrap();
    assert_eq!(body["top_p"], 0.5);
    // max_tokens is required: the default budget when none is set.
    assert_eq!(body["max_tokens"], 8192);
}

#[test]
fn gemini_puts_them_in_generation_config() {
    let config = GeminiConfig::new("gemini-2.0-flash", ApiKey::new("AIza-test"));
    let body = lrg_providers::gemini::encode(&request(), &config).unwrap();
    insta::assert_json_snapshot!("gemini_settings", body);

    // The API's seed is an int32: a larger one keeps its low 31 bits.
    let big_seed = request().settings(GenerationSettings::new().seed(u32::MAX));
    let body = lrg_providers::gemini::encode(&big_seed, &config).unwrap();
    assert_eq!(body["generationConfig"]["seed"], json!(i32::MAX));
}

#[test]
fn ollama_puts_them_in_options_beside_num_ctx() {
    let mut config = OllamaConfig::new("http://127.0.0.1:9", "qwen3:8b");
    config.context_window = Some(16_384);
    let body = lrg_providers::ollama::encode(&request(), &config).unwrap();
    insta::assert_json_snapshot!("ollama_settings", body);
}

#[test]
fn unset_settings_leave_each_adapter_its_defaults() {
    let bare = TurnRequest::new(vec![Message::user("hi")]);
    let config = OpenAiConfig::new(Dialect::LMSTUDIO, "http://127.0.0.1:9/v1", "m");
    let body = lrg_providers::openai::encode(&bare, &config).unwrap();
    assert_eq!(body["max_tokens"], 2048);
    for unset in ["temperature", "top_p", "seed", "stop"] {
        assert!(body.get(unset).is_none(), "{unset} in {body}");
    }
}

#[test]
fn settings_an_api_lacks_are_dropped_with_a_debug_line() {
    let logs = LogBuffer::global();
    responses(ResponsesHost::OPENAI, "gpt-4.1");
    let text = logs.text();
    for setting in ["seed", "top_k", "stop"] {
        assert!(
            text.lines().any(|l| l.contains("DEBUG")
                && l.contains("dropped")
                && l.contains(&format!("setting=\"{setting}\""))),
            "no debug line for {setting}: {text}"
        );
    }
}
