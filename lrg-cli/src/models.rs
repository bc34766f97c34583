//! `lrg models`: a view of the library's [`ModelCatalog`], grouped by
//! provider.

use lrg_providers::ModelLocation;
use lrg_providers::catalog::{CatalogModel, ModelCatalog, ProviderModels};

use crate::cli::{ModelArgs, ModelsArgs};
use crate::exit::{CliError, Exit};

/// List the models reachable now, grouped by provider, with the reason when
/// a provider cannot be used.
pub async fn models(args: ModelsArgs) -> Result<Exit, CliError> {
    let model_args = ModelArgs {
        model: None,
        base_url: args.base_url.clone(),
        local_only: args.local_only,
        tool_format: None,
        mmproj: None,
        model_timeout: None,
        engine: Default::default(),
    };
    crate::out::print(catalog_table(&model_args, args.json).await);
    Ok(Exit::Replied)
}

/// The catalog as `lrg models` prints it (JSON or the human table); also
/// what `/models` shows in `lrg chat`. `--local-only` leaves clouds out.
pub async fn catalog_table(args: &ModelArgs, json: bool) -> String {
    let connections = crate::providers::connections(args, Some(lrg_providers::Provider::Server));
    let mut listing = ModelCatalog::new(connections).list().await.as_ref().clone();
    crate::local::explain_missing(&mut listing);
    let shown: Vec<&ProviderModels> = listing
        .iter()
        .filter(|g| !args.local_only || g.locality != ModelLocation::Cloud)
        .collect();
    let agents = crate::acp_agents::list(args).await;
    if json {
        let out = serde_json::json!({ "providers": shown, "agents": agents });
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&out).unwrap_or_default()
        );
    }
    table(&shown) + &crate::acp_agents::table(&agents)
}

fn locality(l: ModelLocation) -> &'static str {
    match l {
        ModelLocation::Local => "on this machine",
        ModelLocation::Server => "your server",
        ModelLocation::Cloud => "cloud",
    }
}

/// The human table: a heading per provider, a line per model.
fn table(groups: &[&ProviderModels]) -> String {
    let mut out = String::new();
    for g in groups {
        let state = match g.availability.reason() {
            Some(reason) => format!("not available: {reason}"),
            None => format!("{} model(s)", g.models.len()),
        };
        out.push_str(&format!(
            "{} ({}): {state}\n",
            g.provider,
            locality(g.locality)
        ));
        for m in &g.models {
            out.push_str(&format!("  {}\n", model_line(m)));
        }
    }
    out
}

fn model_line(m: &CatalogModel) -> String {
    let mut notes = vec![if m.window_assumed {
        format!("{} tokens assumed", m.context_window)
    } else {
        format!("{} tokens", m.context_window)
    }];
    if m.vision == Some(true) {
        notes.push("images".into());
    }
    if m.native_tools == Some(true) {
        notes.push("tools".into());
    }
    // How a typed answer (`--output-schema`) is held to its schema.
    notes.push(format!("typed: {}", m.output_mode));
    if let Some(size) = m.size_bytes {
        notes.push(human_size(size));
    }
    if let Some(host) = &m.sends_to {
        notes.push(format!("sent to {host}"));
    }
    let name = m
        .name
        .as_deref()
        .filter(|n| !m.model.ends_with(n))
        .map(|n| format!(" \"{n}\""))
        .unwrap_or_default();
    format!("{}{name}  ({})", m.id, notes.join(", "))
}

fn human_size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else {
        format!("{:.0} MB", (b / 1e6).max(1.0))
    }
}
