//! The price table the CLI prices turns with (`--prices FILE` /
//! `LRG_PRICES` over the built-in one), `lrg prices`, and the cost summary
//! `lrg run` prints on stderr.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use lrg_providers::pricing::{PriceFile, PriceTable, Spend};

use crate::cli::PricesArgs;
use crate::exit::{CliError, Exit};
use crate::usage;

static TABLE: OnceLock<Arc<PriceTable>> = OnceLock::new();

/// Read the user's prices file (`--prices` / `LRG_PRICES`), if any, over the
/// built-in table and keep the result for [`table`]. Called once by `main`;
/// a file that cannot be used is bad usage (exit 2), said before any model
/// is contacted.
pub fn load(path: Option<&Path>) -> Result<(), CliError> {
    let table = match path {
        Some(path) => PriceTable::with_file(path).map_err(|e| usage!("--prices: {e}"))?,
        None => PriceTable::built_in(),
    };
    let _ = TABLE.set(Arc::new(table));
    Ok(())
}

/// The prices in force (the built-in table when [`load`] was not called).
pub fn table() -> Arc<PriceTable> {
    Arc::clone(TABLE.get_or_init(|| Arc::new(PriceTable::built_in())))
}

/// `lrg prices`: the effective table, as a table or JSON; `--schema`: the
/// JSON Schema of a prices file.
pub async fn prices(args: PricesArgs) -> Result<Exit, CliError> {
    if args.schema {
        let schema = serde_json::to_string_pretty(&PriceFile::schema()).unwrap_or_default();
        crate::out::line(schema);
        return Ok(Exit::Replied);
    }
    let table = table();
    if args.json {
        let mut file = PriceFile::default();
        file.models = table
            .entries()
            .map(|(id, price, _)| (id.to_string(), price.clone()))
            .collect();
        file.aliases = table
            .aliases()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        crate::out::line(serde_json::to_string_pretty(&file).unwrap_or_default());
        return Ok(Exit::Replied);
    }
    crate::out::print(listing(&table));
    Ok(Exit::Replied)
}

/// The human table: one model a line, dollars per million tokens.
fn listing(table: &PriceTable) -> String {
    let rows: Vec<[String; 6]> = table
        .entries()
        .map(|(id, price, from_user)| {
            let figure = |p: Option<f64>| p.map_or_else(|| "-".to_string(), |p| format!("{p}"));
            [
                format!("{id}{}", if from_user { " *" } else { "" }),
                figure(Some(price.input)),
                figure(price.cached_input),
                figure(price.cache_write),
                figure(Some(price.output)),
                price.checked.clone().unwrap_or_else(|| "-".to_string()),
            ]
        })
        .collect();
    let head = [
        "MODEL",
        "INPUT",
        "CACHED",
        "CACHE WRITE",
        "OUTPUT",
        "CHECKED",
    ];
    let mut widths = head.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::from(
        "US dollars per million tokens (-: at the input price; reasoning is billed as output)\n\n",
    );
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let _ = write!(text, "{cell:<w$}  ", w = widths[i]);
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&head);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    let aliases: Vec<String> = table
        .aliases()
        .map(|(a, b)| format!("{a}: as {b}"))
        .collect();
    if !aliases.is_empty() {
        let _ = writeln!(
            out,
            "\nPriced as another provider's models: {}",
            aliases.join(", ")
        );
    }
    if table.entries().any(|(_, _, user)| user) {
        out.push_str("* from your prices file\n");
    }
    out.push_str(
        "\nLocal and server models cost 0 unless listed; an unlisted cloud model is unpriced.\n\
         Add or change prices with --prices FILE or $LRG_PRICES (TOML or JSON; `lrg prices \
         --schema`).\n",
    );
    out
}

/// The `lrg run` summary on stderr:
/// `lrg: 1,234 tokens (1,000 in, 800 of them cached; 234 out), $0.0031, 2.4 s`.
pub fn summary_line(spend: &Spend, elapsed: Duration) -> String {
    format!("lrg: {}, {:.1} s", summary_of(spend), elapsed.as_secs_f64())
}

/// `1,234 tokens (1,000 in, 800 of them cached; 234 out), $0.0031`: a total
/// for people (`lrg run`'s summary, `lrg sessions show`).
pub fn summary_of(spend: &Spend) -> String {
    let u = &spend.usage;
    let mut input = format!("{} in", grouped(u64::from(u.prompt_tokens)));
    if let Some(cached) = u.cached_prompt_tokens.filter(|n| *n > 0) {
        let _ = write!(input, ", {} of them cached", grouped(u64::from(cached)));
    }
    let mut output = format!("{} out", grouped(u64::from(u.completion_tokens)));
    if let Some(reasoning) = u.reasoning_tokens.filter(|n| *n > 0) {
        let _ = write!(
            output,
            ", {} of them reasoning",
            grouped(u64::from(reasoning))
        );
    }
    format!(
        "{} tokens ({input}; {output}), {}",
        grouped(spend.total_tokens()),
        spend.cost.display()
    )
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use lrg_providers::Usage;
    use lrg_providers::pricing::Cost;

    use super::*;

    #[test]
    fn the_summary_names_tokens_cache_cost_and_time() {
        let mut spend = Spend::default();
        spend.add(
            Usage::new(1_000, 234).with_cached_prompt_tokens(800),
            Cost::usd(0.0031),
        );
        let line = summary_line(&spend, Duration::from_millis(2_400));
        assert_eq!(
            line,
            "lrg: 1,234 tokens (1,000 in, 800 of them cached; 234 out), $0.0031, 2.4 s"
        );
        spend.add(Usage::new(0, 0), Cost::UNPRICED);
        assert!(summary_line(&spend, Duration::ZERO).contains("≥ $0.0031 (part unpriced)"));
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped(12), "12");
    }
}
