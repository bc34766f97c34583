use super::*;
use crate::Provider;
use crate::catalog::Access;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn usd(cost: Cost) -> f64 {
    assert!(cost.priced, "{cost:?}");
    cost.usd.unwrap()
}

fn cloud(table: &PriceTable, id: &str, usage: Usage) -> Cost {
    let (provider, model) = id.split_once(':').unwrap();
    cost_of(table, provider, model, ModelLocation::Cloud, &usage)
}

#[test]
fn the_built_in_table_parses_and_dates_every_price() {
    let file = PriceFile::parse(table::BUILT_IN_FOR_TESTS, "built-in").unwrap();
    assert!(file.models.len() > 30, "{}", file.models.len());
    for (id, price) in &file.models {
        let (provider, _) = id.split_once(':').unwrap();
        assert!(
            provider.parse::<Provider>().is_ok(),
            "{id}: unknown provider"
        );
        let checked = price.checked.as_deref().unwrap_or_default();
        assert_eq!(checked.len(), 10, "{id}: checked `{checked}`");
    }
    assert_eq!(PriceTable::built_in().entries().count(), file.models.len());
}

#[test]
fn every_cloud_provider_with_a_key_has_prices() {
    let table = PriceTable::built_in();
    for p in Provider::ALL {
        let spec = p.spec();
        // Agent CLIs bill their own subscriptions; OpenRouter passes on
        // each vendor's price under its own ids (priced by a user's file).
        if spec.locality != ModelLocation::Cloud
            || matches!(spec.access, Access::Cli(_))
            || *p == Provider::OpenRouter
        {
            continue;
        }
        assert!(
            table.price(spec.id, spec.example).is_some()
                || table
                    .entries()
                    .any(|(id, _, _)| id.starts_with(&format!("{}:", spec.id)))
                || table.aliases().any(|(from, _)| from == spec.id),
            "{p}: no price"
        );
    }
}

#[test]
fn cached_input_is_billed_at_its_own_price() {
    // gpt-4.1: $2 in, $0.50 cached, $8 out per million.
    let usage = Usage::new(10_000, 2_000).with_cached_prompt_tokens(4_000);
    // 6,000 × 2 + 4,000 × 0.5 + 2,000 × 8 = 30,000 per million.
    let cost = cloud(&PriceTable::built_in(), "openai:gpt-4.1", usage);
    assert!(close(usd(cost), 0.03), "{cost:?}");
}

#[test]
fn cache_writes_are_billed_at_their_own_price() {
    // claude-sonnet-4-5: $3 in, $0.30 read, $3.75 written, $15 out.
    let usage = Usage::new(20_000, 1_000)
        .with_cached_prompt_tokens(10_000)
        .with_cache_write_tokens(5_000);
    // 5,000 × 3 + 10,000 × 0.3 + 5,000 × 3.75 + 1,000 × 15 = 51,750.
    let cost = cloud(
        &PriceTable::built_in(),
        "anthropic:claude-sonnet-4-5-20250929",
        usage,
    );
    assert!(close(usd(cost), 0.05175), "{cost:?}");
}

#[test]
fn reasoning_is_billed_as_output_unless_priced_apart() {
    // o4-mini: $1.10 in, $4.40 out; 2,500 of the 3,000 written are reasoning.
    let usage = Usage::new(1_000, 3_000).with_reasoning_tokens(2_500);
    // 1,000 × 1.1 + 3,000 × 4.4 = 14,300.
    let cost = cloud(&PriceTable::built_in(), "openai:o4-mini", usage);
    assert!(close(usd(cost), 0.0143), "{cost:?}");
    // The Responses API's models are priced as OpenAI's.
    let same = cloud(&PriceTable::built_in(), "openai-responses:o4-mini", usage);
    assert_eq!(same, cost);

    let apart = Price::new(1.0, 2.0).with_reasoning(5.0);
    let usage = Usage::new(0, 1_000).with_reasoning_tokens(600);
    // 400 × 2 + 600 × 5 = 3,800.
    assert!(close(apart.usd(&usage), 0.0038));
}

#[test]
fn an_unpriced_cloud_model_is_never_zero_and_local_ones_are() {
    let table = PriceTable::built_in();
    let usage = Usage::new(1_000, 1_000);
    assert_eq!(cloud(&table, "openai:gpt-unknown", usage), Cost::UNPRICED);
    // Another model, not a snapshot of gpt-4.1.
    assert_eq!(cloud(&table, "openai:gpt-4.1-turbo", usage), Cost::UNPRICED);
    let local = cost_of(&table, "ollama", "qwen3:8b", ModelLocation::Server, &usage);
    assert_eq!(local, Cost::ZERO);
    let local = cost_of(&table, "llama", "/m.gguf", ModelLocation::Local, &usage);
    assert_eq!(local, Cost::ZERO);
    assert_eq!(Cost::UNPRICED.display(), "unpriced");
}

#[test]
fn snapshots_take_the_longest_listed_model() {
    let table = PriceTable::built_in();
    let (id, _) = table.price("openai", "gpt-4.1-mini-2025-04-14").unwrap();
    assert_eq!(id, "openai:gpt-4.1-mini");
    let (id, _) = table.price("openai", "gpt-4.1-2025-04-14").unwrap();
    assert_eq!(id, "openai:gpt-4.1");
}

#[test]
fn totals_with_an_unpriced_part_are_a_lower_bound_or_unknown() {
    let mut total = Cost::ZERO;
    total += Cost::UNPRICED;
    assert_eq!(total, Cost::UNPRICED, "nothing known is not $0");
    total += Cost::usd(0.5);
    assert_eq!(
        total,
        Cost {
            usd: Some(0.5),
            priced: false
        }
    );
    assert_eq!(total.display(), "≥ $0.5000 (part unpriced)");
    let mut all = Cost::ZERO;
    all += Cost::usd(0.25);
    all += Cost::usd(1.5);
    assert_eq!(all.display(), "$1.75");

    let mut spend = Spend::default();
    spend.add(
        Usage::new(10, 5).with_cached_prompt_tokens(4),
        Cost::usd(0.01),
    );
    spend.add(Usage::new(20, 1), Cost::usd(0.02));
    assert_eq!(spend.total_tokens(), 36);
    assert_eq!(spend.usage.cached_prompt_tokens, Some(4));
    assert_eq!(spend.turns, 2);
    assert!(close(spend.cost.usd.unwrap(), 0.03));
    let json = serde_json::to_value(spend).unwrap();
    assert_eq!(json["prompt_tokens"], 30);
    assert_eq!(json["cost"]["priced"], true);
}

#[test]
fn a_users_file_overrides_and_extends_the_table() {
    let toml = r#"
        [models."openai:gpt-4.1"]
        input = 1.0
        output = 4.0
        checked = "2026-01-02"

        [models."server:my-model"]
        input = 0.5
        output = 0.5
    "#;
    let mut table = PriceTable::built_in();
    table.extend(PriceFile::parse(toml, "mine.toml").unwrap());
    let usage = Usage::new(1_000_000, 1_000_000);
    assert!(close(usd(cloud(&table, "openai:gpt-4.1", usage)), 5.0));
    // A server model priced by the user is no longer free.
    let mine = cost_of(&table, "server", "my-model", ModelLocation::Server, &usage);
    assert!(close(usd(mine), 1.0));
    let from_user: Vec<&str> = table
        .entries()
        .filter(|(_, _, user)| *user)
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(from_user, ["openai:gpt-4.1", "server:my-model"]);
    // The rest of the built-in table stays.
    assert!(table.price("anthropic", "claude-sonnet-4-5").is_some());

    let json = r#"{"models": {"openrouter:openai/gpt-4.1": {"input": 2, "output": 8}}}"#;
    table.extend(PriceFile::parse(json, "mine.json").unwrap());
    assert!(table.price("openrouter", "openai/gpt-4.1").is_some());
}

#[test]
fn a_bad_prices_file_says_what_is_wrong() {
    let err = |text: &str| PriceFile::parse(text, "p.toml").unwrap_err().to_string();
    let negative = err("[models.\"openai:x\"]\ninput = -1\noutput = 1\n");
    assert!(
        negative.contains("p.toml") && negative.contains("`openai:x`"),
        "{negative}"
    );
    assert!(negative.contains("`input` is -1"), "{negative}");
    let id = err("[models.gpt]\ninput = 1\noutput = 1\n");
    assert!(id.contains("`gpt` is not a model id"), "{id}");
    let unknown = err("[models.\"openai:x\"]\ninput = 1\noutput = 1\ncahced_input = 1\n");
    assert!(unknown.contains("cahced_input"), "{unknown}");
    let json = err("{\"models\": 3}");
    assert!(json.contains("not a prices file"), "{json}");
}

#[test]
fn the_schema_describes_the_file() {
    let schema = PriceFile::schema();
    assert_eq!(schema["title"], "lrg prices file");
    let text = schema.to_string();
    for field in [
        "models",
        "aliases",
        "cached_input",
        "cache_write",
        "checked",
    ] {
        assert!(text.contains(field), "{field}: {text}");
    }
}
