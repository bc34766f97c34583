//! Client and context keys: who a keyed session belongs to, and what it is
//! about. With both, opening a session is create-or-resume.

use serde::{Deserialize, Serialize};

/// The rule every key follows, quoted in errors.
pub const KEY_RULE: &str =
    "1 to 64 bytes of A-Z a-z 0-9 . _ : @ -, with at least one letter or digit";

/// Why a key (or a pair) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key breaks [`KEY_RULE`].
    #[error("{which} `{shown}` is not a valid key: use {KEY_RULE}")]
    Invalid {
        /// `client_key` or `context_key`.
        which: &'static str,
        /// The key, cut short when long.
        shown: String,
    },
    /// Only one of the two keys was given.
    #[error("give both client_key and context_key, or neither (only {given} was given)")]
    OnlyOne {
        /// The one that was given.
        given: &'static str,
    },
}

/// One key: 1–64 bytes of `[A-Za-z0-9._:@-]` with at least one alphanumeric.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionKey(String);

impl SessionKey {
    /// `key` if it follows [`KEY_RULE`]; `which` names it in the error.
    pub fn parse(which: &'static str, key: &str) -> Result<Self, KeyError> {
        let allowed = |b: u8| b.is_ascii_alphanumeric() || b"._:@-".contains(&b);
        if (1..=64).contains(&key.len())
            && key.bytes().all(allowed)
            && key.bytes().any(|b| b.is_ascii_alphanumeric())
        {
            Ok(Self(key.to_string()))
        } else {
            Err(KeyError::Invalid {
                which,
                shown: key.chars().take(70).collect(),
            })
        }
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SessionKey {
    type Error = KeyError;

    fn try_from(s: String) -> Result<Self, KeyError> {
        Self::parse("key", &s)
    }
}

impl From<SessionKey> for String {
    fn from(k: SessionKey) -> String {
        k.0
    }
}

impl std::fmt::Display for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A keyed session's keys: `client_key` (who) and `context_key` (what about).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionKeys {
    client_key: SessionKey,
    context_key: SessionKey,
}

impl SessionKeys {
    /// Both keys, checked.
    pub fn new(client_key: &str, context_key: &str) -> Result<Self, KeyError> {
        Ok(Self {
            client_key: SessionKey::parse("client_key", client_key)?,
            context_key: SessionKey::parse("context_key", context_key)?,
        })
    }

    /// Keys from optional request fields: both or neither, else an error.
    pub fn from_optional(
        client_key: Option<&str>,
        context_key: Option<&str>,
    ) -> Result<Option<Self>, KeyError> {
        match (client_key, context_key) {
            (None, None) => Ok(None),
            (Some(c), Some(x)) => Self::new(c, x).map(Some),
            (Some(_), None) => Err(KeyError::OnlyOne {
                given: "client_key",
            }),
            (None, Some(_)) => Err(KeyError::OnlyOne {
                given: "context_key",
            }),
        }
    }

    /// Who.
    pub fn client(&self) -> &SessionKey {
        &self.client_key
    }

    /// What about.
    pub fn context(&self) -> &SessionKey {
        &self.context_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_rule() {
        for good in [
            "a",
            "user@example.com",
            "doc:42",
            "A.b_c-d",
            &"x".repeat(64),
        ] {
            assert!(SessionKey::parse("k", good).is_ok(), "{good}");
        }
        for bad in ["", "...", "-_:", "a b", "é", "a/b", &"x".repeat(65), "a\n"] {
            let err = SessionKey::parse("context_key", bad).unwrap_err();
            assert!(err.to_string().contains("context_key"), "{err}");
            assert!(err.to_string().contains("1 to 64 bytes"), "{err}");
        }
    }

    #[test]
    fn one_key_alone_is_an_error() {
        assert_eq!(SessionKeys::from_optional(None, None), Ok(None));
        let err = SessionKeys::from_optional(Some("me"), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "give both client_key and context_key, or neither (only client_key was given)"
        );
        assert!(SessionKeys::from_optional(None, Some("x")).is_err());
        let keys = SessionKeys::from_optional(Some("me"), Some("doc:1"))
            .unwrap()
            .unwrap();
        assert_eq!(keys.client().as_str(), "me");
        assert_eq!(keys.context().as_str(), "doc:1");
    }
}
