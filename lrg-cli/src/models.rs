//! `lrg models`: what can be run now, by provider.

use crate::cli::{ModelArgs, ModelsArgs};
use crate::exit::{CliError, Exit};

/// List the models reachable now, grouped by provider, with the reason when
/// a provider cannot be used.
pub async fn models(args: ModelsArgs) -> Result<Exit, CliError> {
    let model_args = ModelArgs {
        model: None,
        base_url: args.base_url.clone(),
        tool_format: None,
    };
    let all = crate::providers::list_all(&model_args).await;
    if args.json {
        let out = serde_json::json!({ "providers": all });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return Ok(Exit::Replied);
    }
    for p in &all {
        match (&p.reason, p.available) {
            (Some(reason), false) => println!("{}: not available: {reason}", p.provider),
            (Some(note), true) => println!("{}: {note}", p.provider),
            (None, _) => println!("{}: {} model(s)", p.provider, p.models.len()),
        }
        for m in &p.models {
            let window = m
                .context_window
                .map(|w| format!("  ({w} tokens)"))
                .unwrap_or_default();
            println!("  {}:{}{window}", p.provider, m.model);
        }
    }
    Ok(Exit::Replied)
}
