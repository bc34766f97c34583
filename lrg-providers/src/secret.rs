//! [`ApiKey`]: a secret that never shows up in `Debug`, `Display` or serde output.

use std::fmt;

/// An API key. Its `Debug` and `Display` print `[redacted]`; it does not
/// implement `Serialize`, so it cannot end up in a saved file by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wrap a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// Read a key from the first of `vars` that is set and non-empty.
    pub fn from_env(vars: &[&str]) -> Option<Self> {
        vars.iter()
            .filter_map(|v| std::env::var(v).ok())
            .find(|v| !v.trim().is_empty())
            .map(|v| Self(v.trim().to_string()))
    }

    /// The key itself, for building a request header. Never log the result.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Remove every occurrence of the key from `text` (for error bodies that
    /// echo the request back).
    pub fn scrub(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_string();
        }
        text.replace(&self.0, "[redacted]")
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_printed() {
        let k = ApiKey::new("sk-secret-123");
        assert!(!format!("{k:?} {k}").contains("secret"));
        assert_eq!(k.scrub("bad key sk-secret-123!"), "bad key [redacted]!");
    }
}
