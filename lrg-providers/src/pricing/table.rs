//! The price table: the built-in one, a user's file over it, and lookups.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Price;

/// The built-in table, checked by a test to parse.
const BUILT_IN: &str = include_str!("prices.toml");

#[cfg(test)]
pub(super) const BUILT_IN_FOR_TESTS: &str = BUILT_IN;

/// A prices file as written: the built-in `prices.toml`, or a user's file
/// (TOML or JSON) that overrides and extends it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "lrg prices file")]
#[non_exhaustive]
pub struct PriceFile {
    /// Providers billed as another provider's models, e.g.
    /// `"openai-responses" = "openai"`: a model with no price of its own is
    /// priced as the same model of the other provider.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub aliases: BTreeMap<String, String>,
    /// Prices by model id, `provider:model` (`openai:gpt-4.1`). A dated
    /// snapshot (`gpt-4.1-2025-04-14`) takes the price of its model.
    #[serde(default)]
    pub models: BTreeMap<String, Price>,
}

/// Why a prices file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PricesError {
    /// The file could not be read.
    #[error("prices file {path}: cannot read it: {reason}")]
    Read {
        /// The file.
        path: String,
        /// What the system said.
        reason: String,
    },
    /// The file is not a prices file.
    #[error("prices file {path}: {reason}")]
    Invalid {
        /// The file (or `built-in`).
        path: String,
        /// What is wrong, naming the key.
        reason: String,
    },
}

impl PriceFile {
    /// Read `text` as TOML, or as JSON when it starts with `{`; `origin`
    /// names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, PricesError> {
        let invalid = |reason: String| PricesError::Invalid {
            path: origin.to_string(),
            reason,
        };
        let file: PriceFile = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| invalid(format!("not a prices file: {e}")))?
        } else {
            toml::from_str(text).map_err(|e| invalid(format!("not a prices file: {e}")))?
        };
        for (id, price) in &file.models {
            if id
                .split_once(':')
                .is_none_or(|(p, m)| p.is_empty() || m.is_empty())
            {
                return Err(invalid(format!(
                    "`{id}` is not a model id: write `provider:model`, e.g. `openai:gpt-4.1`"
                )));
            }
            price.check().map_err(|e| invalid(format!("`{id}`: {e}")))?;
        }
        Ok(file)
    }

    /// Read the file at `path` ([`parse`](Self::parse)).
    pub fn read(path: &Path) -> Result<Self, PricesError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| PricesError::Read {
            path: origin.clone(),
            reason: e.to_string(),
        })?;
        Self::parse(&text, &origin)
    }

    /// The JSON Schema of a prices file (what `lrg prices --schema` prints).
    pub fn schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(PriceFile)).unwrap_or_default()
    }
}

/// The prices in force: the built-in table with any user files over it.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    models: BTreeMap<String, Price>,
    aliases: BTreeMap<String, String>,
    /// Ids a user's file set (over the built-in price, or new).
    from_user: BTreeSet<String>,
}

impl Default for PriceTable {
    /// The built-in table.
    fn default() -> Self {
        Self::built_in()
    }
}

impl PriceTable {
    /// The built-in table.
    pub fn built_in() -> Self {
        // A test parses it: an error here would be a bad build, and a table
        // that prices nothing only makes cloud turns unpriced.
        let file = PriceFile::parse(BUILT_IN, "built-in").unwrap_or_else(|e| {
            tracing::warn!("{e}");
            PriceFile::default()
        });
        Self {
            models: file.models,
            aliases: file.aliases,
            from_user: BTreeSet::new(),
        }
    }

    /// A table with no prices at all.
    pub fn empty() -> Self {
        Self {
            models: BTreeMap::new(),
            aliases: BTreeMap::new(),
            from_user: BTreeSet::new(),
        }
    }

    /// Put a user's `file` over this table: its prices replace those of
    /// the same ids and add the others; its aliases likewise.
    pub fn extend(&mut self, file: PriceFile) {
        for (id, price) in file.models {
            self.from_user.insert(id.clone());
            self.models.insert(id, price);
        }
        self.aliases.extend(file.aliases);
    }

    /// The built-in table with the file at `path` over it.
    pub fn with_file(path: &Path) -> Result<Self, PricesError> {
        let mut table = Self::built_in();
        table.extend(PriceFile::read(path)?);
        Ok(table)
    }

    /// Set the price of `id` (`provider:model`).
    pub fn set(&mut self, id: impl Into<String>, price: Price) {
        let id = id.into();
        self.from_user.insert(id.clone());
        self.models.insert(id, price);
    }

    /// The price of `model` on `provider`, and the id it is listed under:
    /// the model's own, else that of the model it is a dated snapshot of
    /// (`-2025-04-14`, `-20250929`, `-001`), else the same through the
    /// provider's alias.
    pub fn price(&self, provider: &str, model: &str) -> Option<(&str, &Price)> {
        self.lookup(provider, model).or_else(|| {
            let alias = self.aliases.get(provider)?;
            self.lookup(alias, model)
        })
    }

    fn lookup(&self, provider: &str, model: &str) -> Option<(&str, &Price)> {
        let id = format!("{provider}:{model}");
        if let Some((key, price)) = self.models.get_key_value(&id) {
            return Some((key.as_str(), price));
        }
        // The longest listed id that `id` is a snapshot of.
        self.models
            .range(format!("{provider}:")..)
            .take_while(|(key, _)| key.starts_with(&format!("{provider}:")))
            .filter(|(key, _)| {
                id.strip_prefix(key.as_str())
                    .is_some_and(is_snapshot_suffix)
            })
            .max_by_key(|(key, _)| key.len())
            .map(|(key, price)| (key.as_str(), price))
    }

    /// Every price, by id, with whether a user's file set it.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Price, bool)> {
        self.models
            .iter()
            .map(|(id, price)| (id.as_str(), price, self.from_user.contains(id)))
    }

    /// The provider aliases, `provider → billed as`.
    pub fn aliases(&self) -> impl Iterator<Item = (&str, &str)> {
        self.aliases.iter().map(|(a, b)| (a.as_str(), b.as_str()))
    }
}

/// `-2025-04-14`, `-20250929`, `-001`, `-latest`: a dated or numbered
/// release of the same model, not another model (`-mini`).
fn is_snapshot_suffix(rest: &str) -> bool {
    let Some(tail) = rest.strip_prefix('-') else {
        return false;
    };
    tail == "latest" || (!tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit() || c == '-'))
}
