//! What a model turn cost: a price table as data and the arithmetic.
//!
//! The built-in table (`prices.toml`, beside this file) holds, per model id
//! (`provider:model`), the US dollars per million input, output,
//! cached-input and cache-write tokens its vendor published, with the date
//! they were checked. A user's file ([`PriceFile`], TOML or JSON, same
//! shape) overrides and extends it ([`PriceTable::extend`]).
//!
//! # The rules
//!
//! - [`Usage`] counts are normalised: `prompt_tokens` includes the cached
//!   and cache-written ones, `completion_tokens` the reasoning ones. So a
//!   turn costs `(prompt - cached - written) × input + cached × cached_input
//!   + written × cache_write + completion × output` per million, with
//!   reasoning billed as output unless a price says `reasoning`.
//! - Local and server models cost 0 unless the table prices them; an
//!   external ACP agent (provider `acp`) is unpriced, since lrg cannot know
//!   which model it pays for.
//! - A cloud model the table does not know is *unpriced*: its [`Cost`] says
//!   `priced: false` and has no `usd`. An unknown price is never shown as 0.

mod table;

use serde::{Deserialize, Serialize};

pub use table::{PriceFile, PriceTable, PricesError};

use crate::{ModelLocation, Usage};

/// Dollars per million tokens of one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Price {
    /// Prompt tokens computed (not read from a cache).
    pub input: f64,
    /// Tokens written by the model, reasoning included.
    pub output: f64,
    /// Prompt tokens read from the provider's cache; `input` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Prompt tokens written to the provider's cache; `input` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// Reasoning tokens, for a provider that bills them apart; `output`
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<f64>,
    /// When the price was checked against the vendor's page (`YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<String>,
}

impl Price {
    /// `input` and `output` dollars per million tokens; cached and
    /// cache-written input at the input price.
    pub fn new(input: f64, output: f64) -> Self {
        Self {
            input,
            output,
            cached_input: None,
            cache_write: None,
            reasoning: None,
            checked: None,
        }
    }

    /// With the price of cached input tokens.
    pub fn with_cached_input(mut self, price: f64) -> Self {
        self.cached_input = Some(price);
        self
    }

    /// With the price of tokens written to the cache.
    pub fn with_cache_write(mut self, price: f64) -> Self {
        self.cache_write = Some(price);
        self
    }

    /// With the price of reasoning tokens, when billed apart from output.
    pub fn with_reasoning(mut self, price: f64) -> Self {
        self.reasoning = Some(price);
        self
    }

    /// What `usage` costs at this price, in dollars.
    pub fn usd(&self, usage: &Usage) -> f64 {
        let cached = u64::from(usage.cached_prompt_tokens.unwrap_or(0));
        let written = u64::from(usage.cache_write_tokens.unwrap_or(0));
        let fresh = u64::from(usage.prompt_tokens).saturating_sub(cached + written);
        let reasoning = u64::from(usage.reasoning_tokens.unwrap_or(0));
        let answer = u64::from(usage.completion_tokens).saturating_sub(reasoning);
        let per_million = fresh as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + written as f64 * self.cache_write.unwrap_or(self.input)
            + answer as f64 * self.output
            + reasoning as f64 * self.reasoning.unwrap_or(self.output);
        per_million / 1_000_000.0
    }

    /// Every figure is a finite number, not below 0.
    fn check(&self) -> Result<(), String> {
        let figures = [
            ("input", Some(self.input)),
            ("output", Some(self.output)),
            ("cached_input", self.cached_input),
            ("cache_write", self.cache_write),
            ("reasoning", self.reasoning),
        ];
        for (name, value) in figures {
            if let Some(v) = value
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(format!(
                    "`{name}` is {v}: a price is a number of dollars, 0 or more"
                ));
            }
        }
        Ok(())
    }
}

/// What something cost: `usd` when known. `priced: false` means some of it
/// has no known price: `usd` is then what the priced part cost (a lower
/// bound), or `null` when nothing of it was priced, never a made-up 0.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Cost {
    /// Dollars, when any of it is priced.
    pub usd: Option<f64>,
    /// Whether all of it is priced.
    pub priced: bool,
}

// Never NaN: every figure is a checked price times a count, or a sum of them.
impl Eq for Cost {}

impl Cost {
    /// Nothing yet: $0, priced (what a total starts from).
    pub const ZERO: Cost = Cost {
        usd: Some(0.0),
        priced: true,
    };

    /// No known price.
    pub const UNPRICED: Cost = Cost {
        usd: None,
        priced: false,
    };

    /// `usd` dollars, priced.
    pub fn usd(usd: f64) -> Self {
        Self {
            usd: Some(usd),
            priced: true,
        }
    }

    /// Dollars spent as far as known (0 when nothing is priced): what a
    /// budget compares.
    pub fn known_usd(&self) -> f64 {
        self.usd.unwrap_or(0.0)
    }

    /// `$0.0123`, `≥ $0.0123` (part unpriced) or `unpriced`, for people.
    pub fn display(&self) -> String {
        match (self.usd, self.priced) {
            (Some(usd), true) => format!("${}", dollars(usd)),
            (Some(usd), false) => format!("≥ ${} (part unpriced)", dollars(usd)),
            (None, _) => "unpriced".to_string(),
        }
    }
}

/// Dollars with 4 decimals below $1 (turns cost fractions of a cent), 2 above.
fn dollars(usd: f64) -> String {
    if usd < 1.0 {
        format!("{usd:.4}")
    } else {
        format!("{usd:.2}")
    }
}

/// Totals: `total += part`. Unpriced parts make the total unpriced; what
/// is known of it stays, and a total with nothing known has no `usd`.
impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, other: Cost) {
        self.priced = self.priced && other.priced;
        self.usd = match (self.usd, other.usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        if !self.priced && self.usd == Some(0.0) {
            // Only zeros known and something unknown: not "$0".
            self.usd = None;
        }
    }
}

/// Tokens and cost summed over model turns (a message's, a chat's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Spend {
    /// The token counts, summed.
    #[serde(flatten)]
    pub usage: Usage,
    /// What they cost.
    pub cost: Cost,
    /// How many model turns.
    #[serde(default)]
    pub turns: u32,
}

impl Default for Spend {
    fn default() -> Self {
        Self {
            usage: Usage::default(),
            cost: Cost::ZERO,
            turns: 0,
        }
    }
}

impl Spend {
    /// Add one turn's `usage`, which cost `cost`.
    pub fn add(&mut self, usage: Usage, cost: Cost) {
        self.usage += usage;
        self.cost += cost;
        self.turns = self.turns.saturating_add(1);
    }

    /// Add another total (a sub-agent's).
    pub fn absorb(&mut self, other: &Spend) {
        self.usage += other.usage;
        self.cost += other.cost;
        self.turns = self.turns.saturating_add(other.turns);
    }

    /// Prompt and completion tokens together.
    pub fn total_tokens(&self) -> u64 {
        u64::from(self.usage.prompt_tokens) + u64::from(self.usage.completion_tokens)
    }
}

/// The cost of `usage` on `provider:model`, which runs at `location`: by
/// the table's price when it has one; else 0 for a local or server model
/// and unpriced for a cloud one or an external ACP agent (provider `acp`).
pub fn cost_of(
    table: &PriceTable,
    provider: &str,
    model: &str,
    location: ModelLocation,
    usage: &Usage,
) -> Cost {
    match table.price(provider, model) {
        Some((_, price)) => Cost::usd(price.usd(usage)),
        // An external ACP agent runs a model of its own choosing, often a
        // paid cloud one: its price is unknown, never 0.
        None if location == ModelLocation::Cloud || provider == "acp" => Cost::UNPRICED,
        None => Cost::ZERO,
    }
}

#[cfg(test)]
mod tests;
