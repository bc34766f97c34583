//! [`ModelCatalog`] against wiremock fakes of each kind of server: models
//! listed with real windows, capabilities and locality; a server that is
//! down is unavailable with a reason; a slow one times out without holding
//! up the rest; local GGUF files found in a model directory; the listing
//! cached; a connected Ollama model sent `num_ctx`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use lrg_providers::catalog::gguf::fixture::{Value as G, gguf_bytes};
use lrg_providers::catalog::{ASSUMED_CONTEXT_WINDOW, Connections, ModelCatalog, ProviderModels};
use lrg_providers::{
    ApiKey, ChatModel, Message, ModelLocation, ModelRef, Provider, TurnRequest, collect_turn,
};
use serde_json::json;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Every test is bounded: a hang fails instead of stalling CI.
const BOUND: Duration = Duration::from_secs(30);
const KEY: &str = "sk-catalog-test-key-0001";

async fn fake_ollama(expect_tags: u64) -> MockServer {
    let s = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/tags"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"models": [{"name": "qwen3:8b"}, {"name": "llava:7b"}]})),
        )
        .expect(expect_tags)
        .mount(&s)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .and(body_partial_json(json!({"model": "qwen3:8b"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "capabilities": ["completion", "tools"],
            "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}
        })))
        .mount(&s)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .and(body_partial_json(json!({"model": "llava:7b"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "capabilities": ["completion", "vision"],
            "model_info": {"general.architecture": "llama", "llama.context_length": 4096}
        })))
        .mount(&s)
        .await;
    s
}

async fn fake_lmstudio() -> MockServer {
    let s = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": [
            {"id": "qwen3-8b"}, {"id": "text-embedding-nomic"}
        ]})))
        .mount(&s)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v0/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": [
            {"id": "qwen3-8b", "type": "llm", "state": "loaded", "max_context_length": 40960,
             "loaded_context_length": 16384, "capabilities": ["tool_use"]},
            {"id": "text-embedding-nomic", "type": "embeddings"}
        ]})))
        .mount(&s)
        .await;
    s
}

/// vLLM: its `/v1/models` states `max_model_len`; it has no `/props`.
async fn fake_vllm() -> MockServer {
    let s = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": [
            {"id": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 65536}
        ]})))
        .mount(&s)
        .await;
    s
}

/// llama-server: `/v1/models` without a window, `/props` with `n_ctx`.
async fn fake_llama_server() -> MockServer {
    let s = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": [{"id": "model.gguf"}]})),
        )
        .mount(&s)
        .await;
    Mock::given(method("GET"))
        .and(path("/props"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"default_generation_settings": {"n_ctx": 8192}, "modalities": {"vision": true}}),
        ))
        .mount(&s)
        .await;
    s
}

async fn fake_openai() -> MockServer {
    let s = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": [
            {"id": "gpt-4.1"}, {"id": "text-embedding-3-small"}
        ]})))
        .mount(&s)
        .await;
    s
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

fn group(listing: &[ProviderModels], p: Provider) -> &ProviderModels {
    listing.iter().find(|g| g.provider == p).unwrap()
}

#[tokio::test]
async fn every_kind_of_server_with_real_windows_and_locality() {
    let (ollama, lmstudio, vllm, openai) = (
        fake_ollama(1).await,
        fake_lmstudio().await,
        fake_vllm().await,
        fake_openai().await,
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tiny.gguf"),
        gguf_bytes(&[
            ("general.architecture", G::Str("llama".into())),
            ("general.name", G::Str("Tiny".into())),
            ("llama.context_length", G::U32(2048)),
        ]),
    )
    .unwrap();
    let connections = Connections::new()
        .with_base_url(Provider::Ollama, ollama.uri())
        .with_base_url(Provider::LmStudio, format!("{}/v1", lmstudio.uri()))
        .with_base_url(Provider::Server, format!("{}/v1", vllm.uri()))
        .with_base_url(Provider::OpenAi, format!("{}/v1", openai.uri()))
        .with_api_key(Provider::OpenAi, ApiKey::new(KEY))
        .with_model_dir(dir.path())
        .with_engine(
            Provider::Llama,
            super::engine_pool::CountingLoader::new(Duration::ZERO),
        );
    let catalog = ModelCatalog::new(connections);
    let listing = tokio::time::timeout(BOUND, catalog.list()).await.unwrap();

    // Every listed row of the table, in the table's order.
    let order: Vec<Provider> = listing.iter().map(|g| g.provider).collect();
    let listed: Vec<Provider> = Provider::ALL
        .iter()
        .copied()
        .filter(|p| p.spec().is_listed())
        .collect();
    assert_eq!(order, listed);

    let o = group(&listing, Provider::Ollama);
    assert!(o.availability.is_available(), "{o:?}");
    assert_eq!(o.locality, ModelLocation::Server);
    let qwen = &o.models[0];
    assert_eq!(
        (qwen.id.as_str(), qwen.context_window, qwen.window_assumed),
        ("ollama:qwen3:8b", 40_960, false)
    );
    assert_eq!((qwen.native_tools, qwen.vision), (Some(true), Some(false)));
    assert_eq!(o.models[1].vision, Some(true));
    // A server on this machine: the conversation does not leave it.
    assert_eq!(qwen.sends_to, None);

    let l = group(&listing, Provider::LmStudio);
    assert_eq!(l.models.len(), 1, "embedding models are not chat models");
    assert_eq!(l.models[0].context_window, 16_384, "the loaded length");
    assert_eq!(l.models[0].native_tools, Some(true));

    let v = group(&listing, Provider::Server);
    assert_eq!(v.models[0].context_window, 65_536);

    let a = group(&listing, Provider::OpenAi);
    assert!(a.availability.is_available(), "{a:?}");
    assert_eq!(a.locality, ModelLocation::Cloud);
    let gpt = &a.models[0];
    assert_eq!(gpt.model, "gpt-4.1");
    // The list states no window: assumed, and said so.
    assert_eq!(
        (gpt.context_window, gpt.window_assumed),
        (ASSUMED_CONTEXT_WINDOW, true)
    );
    assert_eq!(gpt.vision, Some(true));

    let g = group(&listing, Provider::Llama);
    assert!(g.availability.is_available());
    assert_eq!(g.models.len(), 1);
    let tiny = &g.models[0];
    assert_eq!(tiny.name.as_deref(), Some("Tiny"));
    assert_eq!(tiny.context_window, 2048);
    assert_eq!(tiny.architecture.as_deref(), Some("llama"));
    assert_eq!(tiny.locality, ModelLocation::Local);

    // How each gives a typed answer: a local file by its engine's grammar,
    // a server by its schema field, OpenAI by its strict mode.
    use lrg_providers::typed::OutputMode;
    assert_eq!(tiny.output_mode, OutputMode::Grammar);
    assert_eq!(qwen.output_mode, OutputMode::Native);
    assert_eq!(l.models[0].output_mode, OutputMode::Native);
    assert_eq!(v.models[0].output_mode, OutputMode::Native);
    assert_eq!(gpt.output_mode, OutputMode::NativeStrict);
    let json = serde_json::to_value(tiny).unwrap();
    assert_eq!(json["output_mode"], "grammar");
    let clis = [Provider::ClaudeCli, Provider::CodexCli, Provider::GeminiCli];
    for m in clis.iter().flat_map(|p| &group(&listing, *p).models) {
        assert_eq!(m.output_mode, OutputMode::Prompted, "{}", m.id);
    }

    // No key configured: unavailable, naming the variable.
    let anthropic = group(&listing, Provider::Anthropic);
    let reason = anthropic.availability.reason().unwrap();
    assert!(reason.contains("ANTHROPIC_API_KEY"), "{reason}");
    // No engine linked in: unavailable, saying so.
    let mlx = group(&listing, Provider::Mlx);
    assert!(mlx.availability.reason().unwrap().contains("not part of"));

    // Nothing shown carries the key or the model directory's path.
    let shown = serde_json::to_string(&*listing).unwrap();
    assert!(!shown.contains(KEY));
    for g in listing.iter() {
        if let Some(reason) = g.availability.reason() {
            assert!(!reason.contains(&*dir.path().to_string_lossy()), "{reason}");
        }
    }
}

#[tokio::test]
async fn llama_server_window_from_props() {
    let server = fake_llama_server().await;
    let connections =
        Connections::new().with_base_url(Provider::Server, format!("{}/v1", server.uri()));
    let listing = tokio::time::timeout(BOUND, ModelCatalog::new(connections).list())
        .await
        .unwrap();
    let m = &group(&listing, Provider::Server).models[0];
    assert_eq!((m.context_window, m.window_assumed), (8192, false));
    assert_eq!(m.vision, Some(true));
}

#[tokio::test]
async fn one_down_and_one_slow_leave_the_others_listed() {
    let ollama = fake_ollama(1).await;
    let slow = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": []}))
                .set_delay(Duration::from_secs(60)),
        )
        .mount(&slow)
        .await;
    let connections = Connections::new()
        .with_base_url(Provider::Ollama, ollama.uri())
        .with_base_url(Provider::LmStudio, format!("{}/v1", closed_port()))
        .with_base_url(Provider::Server, format!("{}/v1", slow.uri()))
        .with_probe_timeout(Duration::from_secs(3));
    // Bounded well below the slow server's delay: the probes run side by
    // side and the slow one is cut at its timeout.
    let listing = tokio::time::timeout(BOUND, ModelCatalog::new(connections).list())
        .await
        .unwrap();
    let ok = group(&listing, Provider::Ollama);
    assert!(ok.availability.is_available(), "{ok:?}");
    let down = group(&listing, Provider::LmStudio);
    assert!(down.models.is_empty());
    let reason = down.availability.reason().unwrap();
    assert!(!reason.is_empty());
    let slow_reason = group(&listing, Provider::Server)
        .availability
        .reason()
        .unwrap()
        .to_string();
    assert_eq!(slow_reason, "no answer within 3 s");
}

#[tokio::test]
async fn listings_are_cached_until_refreshed() {
    let ollama = fake_ollama(2).await;
    let catalog =
        ModelCatalog::new(Connections::new().with_base_url(Provider::Ollama, ollama.uri()))
            .with_cache_ttl(Duration::from_secs(3600));
    let first = catalog.list().await;
    let second = catalog.list().await;
    assert!(Arc::ptr_eq(&first, &second));
    let id: ModelRef = "ollama:qwen3:8b".parse().unwrap();
    assert_eq!(catalog.find(&id).await.unwrap().context_window, 40_960);
    catalog.refresh().await;
    // `.expect(2)` on /api/tags: one probe, one refresh.
}

#[tokio::test]
async fn a_connected_ollama_model_knows_its_window_and_sends_num_ctx() {
    let ollama = fake_ollama(1).await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .and(body_partial_json(json!({"options": {"num_ctx": 40960}})))
        .respond_with(ResponseTemplate::new(200).set_body_string(
            "{\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"done\":true,\"done_reason\":\"stop\"}\n",
        ))
        .expect(1)
        .mount(&ollama)
        .await;
    let connections = Connections::new().with_base_url(Provider::Ollama, ollama.uri());
    let id: ModelRef = "ollama:qwen3:8b".parse().unwrap();
    let model = connections.connect(&id).await.unwrap();
    assert_eq!(model.info().context_window, Some(40_960));
    let request = TurnRequest::new(vec![Message::user("hi")]);
    let turn = tokio::time::timeout(BOUND, collect_turn(model.turn(request, Default::default())))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(turn.text(), "hi");
}

#[tokio::test]
async fn a_connected_server_model_sees_images_only_when_its_server_says_so() {
    // Ollama: `/api/show` lists `vision` for llava, not for qwen3.
    let ollama = fake_ollama(2).await;
    let connections = Connections::new().with_base_url(Provider::Ollama, ollama.uri());
    for (id, vision) in [("ollama:qwen3:8b", false), ("ollama:llava:7b", true)] {
        let id: ModelRef = id.parse().unwrap();
        let model = tokio::time::timeout(BOUND, connections.connect(&id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(model.info().vision, vision, "{id}");
    }

    // LM Studio: `type: vlm` sees images, `type: llm` does not.
    let lmstudio = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": [
            {"id": "qwen3-8b"}, {"id": "gemma-3-12b"}
        ]})))
        .mount(&lmstudio)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v0/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": [
            {"id": "qwen3-8b", "type": "llm", "max_context_length": 40960},
            {"id": "gemma-3-12b", "type": "vlm", "max_context_length": 131072}
        ]})))
        .mount(&lmstudio)
        .await;
    let connections =
        Connections::new().with_base_url(Provider::LmStudio, format!("{}/v1", lmstudio.uri()));
    for (id, vision) in [("lmstudio:qwen3-8b", false), ("lmstudio:gemma-3-12b", true)] {
        let id: ModelRef = id.parse().unwrap();
        let model = tokio::time::timeout(BOUND, connections.connect(&id))
            .await
            .unwrap()
            .unwrap();
        let info = model.info();
        assert_eq!(info.vision, vision, "{id}");
        assert!(info.context_window.is_some(), "{id}");
    }

    // LM Studio 0.4's v1 API: every chat model is `type: llm`; its
    // `capabilities.vision` says.
    let lmstudio = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": [
            {"id": "qwen/qwen3.5-9b"}, {"id": "google/gemma-3-4b"}
        ]})))
        .mount(&lmstudio)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"models": [
            {"type": "llm", "key": "qwen/qwen3.5-9b", "max_context_length": 262144,
             "capabilities": {"vision": false, "trained_for_tool_use": true}},
            {"type": "llm", "key": "google/gemma-3-4b", "max_context_length": 131072,
             "capabilities": {"vision": true, "trained_for_tool_use": false}}
        ]})))
        .mount(&lmstudio)
        .await;
    let connections =
        Connections::new().with_base_url(Provider::LmStudio, format!("{}/v1", lmstudio.uri()));
    for (id, vision) in [
        ("lmstudio:qwen/qwen3.5-9b", false),
        ("lmstudio:google/gemma-3-4b", true),
    ] {
        let id: ModelRef = id.parse().unwrap();
        let model = tokio::time::timeout(BOUND, connections.connect(&id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(model.info().vision, vision, "{id}");
    }
}
