//! [`GenerationSettings`]: how a model samples its answer — temperature,
//! answer budget, nucleus and top-k cut-offs, seed and stop sequences.
//!
//! Settings layer: a request's own settings win, then the session's defaults
//! ([`GenerationSettings::or`]), then the adapter's (its config and its
//! built-in budget). Each adapter sends what its API accepts under the name it
//! uses and drops the rest with a `tracing::debug!` line: an unsupported
//! setting never turns into a refused request.

use serde::{Deserialize, Serialize};

/// How a model samples its answer. Every field is optional: an unset one
/// leaves the choice to the next layer (see [`GenerationSettings::or`]).
///
/// ```
/// use lrg_providers::GenerationSettings;
/// let settings = GenerationSettings::new()
///     .temperature(0.2)
///     .max_tokens(500)
///     .stop(["\n\n"]);
/// settings.validate()?;
/// assert_eq!(settings.max_tokens, Some(500));
/// # Ok::<(), lrg_providers::InvalidSetting>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GenerationSettings {
    /// Sampling temperature, 0 (greedy) to 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Answer budget in tokens, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Nucleus sampling: keep the likeliest tokens whose probabilities add up
    /// to this, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Top-k sampling: keep only the `k` likeliest tokens. Sent where the
    /// API takes it (Anthropic, Gemini, Ollama, most OpenAI-compatible
    /// servers; not OpenAI's own API, see
    /// [`Dialect::top_k`](crate::openai::Dialect::top_k)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Sampling seed, for repeatable answers where the provider honours one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u32>,
    /// Text that ends the answer when the model writes it (not included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
}

/// A generation setting outside its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidSetting {
    /// `temperature` not in 0–2.
    #[error("temperature must be between 0 and 2, got {0}")]
    Temperature(f32),
    /// `top_p` not in 0–1.
    #[error("top_p must be between 0 and 1, got {0}")]
    TopP(f32),
    /// `max_tokens` of 0.
    #[error("max_tokens must be at least 1")]
    MaxTokens,
    /// An empty stop sequence (it would end every answer at once).
    #[error("a stop sequence must not be empty")]
    EmptyStop,
}

impl GenerationSettings {
    /// No settings: every choice left to the next layer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sample at `temperature` (0: greedy; up to 2).
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Cap the answer at `max_tokens`.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Nucleus sampling at `top_p` (0–1).
    pub fn top_p(mut self, top_p: f32) -> Self {
        self.top_p = Some(top_p);
        self
    }

    /// Top-k sampling at `top_k`.
    pub fn top_k(mut self, top_k: u32) -> Self {
        self.top_k = Some(top_k);
        self
    }

    /// Sample with this seed.
    pub fn seed(mut self, seed: u32) -> Self {
        self.seed = Some(seed);
        self
    }

    /// End the answer at any of these sequences (replacing earlier ones).
    pub fn stop<S: Into<String>>(mut self, stop: impl IntoIterator<Item = S>) -> Self {
        self.stop = stop.into_iter().map(Into::into).collect();
        self
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// These settings, with each unset one taken from `fallback` (the stop
    /// list as a whole: a non-empty list here replaces the fallback's).
    #[must_use]
    pub fn or(&self, fallback: &GenerationSettings) -> GenerationSettings {
        GenerationSettings {
            temperature: self.temperature.or(fallback.temperature),
            max_tokens: self.max_tokens.or(fallback.max_tokens),
            top_p: self.top_p.or(fallback.top_p),
            top_k: self.top_k.or(fallback.top_k),
            seed: self.seed.or(fallback.seed),
            stop: if self.stop.is_empty() {
                fallback.stop.clone()
            } else {
                self.stop.clone()
            },
        }
    }

    /// Each setting's name and whether it is set, for logging what an API drops.
    pub(crate) fn which_set(&self) -> [(&'static str, bool); 6] {
        [
            ("temperature", self.temperature.is_some()),
            ("max_tokens", self.max_tokens.is_some()),
            ("top_p", self.top_p.is_some()),
            ("top_k", self.top_k.is_some()),
            ("seed", self.seed.is_some()),
            ("stop", !self.stop.is_empty()),
        ]
    }

    /// Check every set value is in range: temperature 0–2, top_p 0–1,
    /// max_tokens at least 1, no empty stop sequence.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(InvalidSetting::Temperature(t));
        }
        if let Some(p) = self.top_p
            && !(0.0..=1.0).contains(&p)
        {
            return Err(InvalidSetting::TopP(p));
        }
        if self.max_tokens == Some(0) {
            return Err(InvalidSetting::MaxTokens);
        }
        if self.stop.iter().any(String::is_empty) {
            return Err(InvalidSetting::EmptyStop);
        }
        Ok(())
    }
}

/// Log, at debug level, the settings an API has no place for.
pub(crate) fn dropped(api: &str, settings: &[(&str, bool)]) {
    for (name, _) in settings.iter().filter(|(_, set)| *set) {
        tracing::debug!(
            api,
            setting = name,
            "generation setting not supported here; dropped"
        );
    }
}

/// The stop sequences an API with a limit of `limit` takes; the rest are
/// dropped with a debug line.
pub(crate) fn capped_stop<'a>(api: &str, stop: &'a [String], limit: Option<usize>) -> &'a [String] {
    match limit {
        Some(limit) if stop.len() > limit => {
            tracing::debug!(
                api,
                limit,
                dropped = stop.len() - limit,
                "more stop sequences than the API takes; the last ones dropped"
            );
            &stop[..limit]
        }
        _ => stop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_settings_win_and_the_rest_fall_back() {
        let session = GenerationSettings::new()
            .temperature(0.2)
            .seed(7)
            .stop(["END"]);
        let request = GenerationSettings::new()
            .temperature(0.9)
            .max_tokens(10)
            .top_k(40);
        let merged = request.or(&session);
        assert_eq!(merged.top_k, Some(40));
        assert_eq!(GenerationSettings::new().or(&merged).top_k, Some(40));
        assert_eq!(merged.temperature, Some(0.9));
        assert_eq!(merged.max_tokens, Some(10));
        assert_eq!(merged.seed, Some(7));
        assert_eq!(merged.stop, ["END"]);
        let own_stop = GenerationSettings::new().stop(["x"]).or(&session);
        assert_eq!(own_stop.stop, ["x"]);
    }

    #[test]
    fn out_of_range_values_are_named() {
        let cases = [
            (GenerationSettings::new().temperature(2.5), "temperature"),
            (
                GenerationSettings::new().temperature(f32::NAN),
                "temperature",
            ),
            (GenerationSettings::new().top_p(1.5), "top_p"),
            (GenerationSettings::new().max_tokens(0), "max_tokens"),
            (GenerationSettings::new().stop([""]), "stop sequence"),
        ];
        for (settings, name) in cases {
            let error = settings.validate().unwrap_err().to_string();
            assert!(error.contains(name), "{error}");
        }
        let fine = GenerationSettings::new()
            .temperature(0.0)
            .top_p(1.0)
            .max_tokens(1)
            .seed(0);
        assert_eq!(fine.validate(), Ok(()));
    }

    #[test]
    fn serde_leaves_out_what_is_unset() {
        let settings = GenerationSettings::new().top_p(0.5).stop(["a"]);
        let json = serde_json::to_value(&settings).unwrap();
        assert_eq!(json, serde_json::json!({"top_p": 0.5, "stop": ["a"]}));
        let back: GenerationSettings = serde_json::from_value(json).unwrap();
        assert_eq!(back, settings);
        assert!(GenerationSettings::new().is_empty());
    }
}
