//! Owner tokens: a bearer token scoped to one owner (a name: the default
//! owner is [`DEFAULT_OWNER`]), minted by the agent token. It lists, opens,
//! names and deletes that owner's chats, and works every route of each of
//! them as its chat token does; never another owner's. Like chat tokens they
//! live in this process's memory only (a restart forgets them) and are
//! compared in constant time.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::error::ApiError;
use super::{AppState, auth};
use crate::store::{DEFAULT_OWNER, SessionId};

/// How many tokens one owner may hold at once; minting one more forgets
/// the oldest, so an app that mints per page load cannot grow the table
/// without bound.
pub(crate) const TOKENS_PER_OWNER: usize = 64;

/// The longest owner name.
pub(crate) const MAX_OWNER_CHARS: usize = 64;

/// The owner tokens of a server, by owner.
#[derive(Default)]
pub(crate) struct OwnerTokens {
    map: Mutex<HashMap<String, VecDeque<String>>>,
}

impl OwnerTokens {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<String>>> {
        // Pushes and pops only: a panic cannot leave it half changed.
        lrg_providers::sync::lock(&self.map)
    }

    /// A new token for `owner` (a valid name: see [`check_owner`]).
    pub(crate) fn mint(&self, owner: &str) -> String {
        let token = auth::new_token();
        let mut map = self.lock();
        let tokens = map.entry(owner.to_string()).or_default();
        if tokens.len() >= TOKENS_PER_OWNER {
            tokens.pop_front();
        }
        tokens.push_back(token.clone());
        token
    }

    /// Whether `given` is one of `owner`'s tokens. Every token of the
    /// owner is compared, in constant time, whichever matches.
    pub(crate) fn accepts(&self, owner: &str, given: &str) -> bool {
        if given.is_empty() {
            return false;
        }
        let map = self.lock();
        let Some(tokens) = map.get(owner) else {
            return false;
        };
        tokens
            .iter()
            .fold(false, |found, t| auth::same_token(given, t) | found)
    }
}

/// Refuse an owner name that is not 1–64 characters of `[A-Za-z0-9._-]`,
/// with a 400 naming `field` and what is wrong.
pub(crate) fn check_owner(field: &str, owner: &str) -> Result<(), ApiError> {
    let chars = owner.chars().count();
    if chars == 0 {
        return Err(ApiError::bad_request(
            field,
            "is empty; an owner is 1-64 characters of A-Z a-z 0-9 . _ -",
        ));
    }
    if chars > MAX_OWNER_CHARS {
        return Err(ApiError::bad_request(
            field,
            format!("has {chars} characters; an owner has at most {MAX_OWNER_CHARS}"),
        ));
    }
    if let Some(bad) = owner
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(ApiError::bad_request(
            field,
            format!("holds {bad:?}; an owner is 1-64 characters of A-Z a-z 0-9 . _ -"),
        ));
    }
    Ok(())
}

impl AppState {
    /// Whether `given` is a token of the owner of live chat `id`: an owner
    /// token works each of its owner's chats as the chat's own token does.
    pub(crate) fn owner_token_matches(&self, id: &SessionId, given: &str) -> bool {
        self.registry.live_meta(id).is_some_and(|meta| {
            self.owner_tokens
                .accepts(meta.owner.as_deref().unwrap_or(DEFAULT_OWNER), given)
        })
    }
}

/// The route's `{owner}`, when the request carries one of that owner's
/// tokens, or the agent token (which may do anything an owner token may);
/// the uniform 403 otherwise. The name is checked after the token (a
/// caller without a right learns nothing), so a bad name with the agent
/// token is a 400 naming it.
pub(crate) struct OwnerAuth {
    /// The owner the route names.
    pub(crate) owner: String,
}

impl FromRequestParts<Arc<AppState>> for OwnerAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        if !auth::origin_allowed(&parts.headers, &state.config.allowed_origins) {
            return Err(ApiError::forbidden());
        }
        let owner = super::guard::path_param(parts, state, "owner").await;
        let given = auth::bearer(&parts.headers).unwrap_or_default();
        // Both compared, whichever holds, so the time says nothing of which.
        let agent = auth::same_token(given, &state.config.agent_token);
        let owners = state.owner_tokens.accepts(&owner, given);
        if !(agent | owners) {
            return Err(ApiError::forbidden());
        }
        check_owner("owner", &owner)?;
        Ok(Self { owner })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_per_owner_and_bounded() {
        let tokens = OwnerTokens::default();
        let a = tokens.mint("alice");
        let b = tokens.mint("bob");
        assert!(tokens.accepts("alice", &a));
        assert!(!tokens.accepts("alice", &b));
        assert!(!tokens.accepts("carol", &a));
        assert!(!tokens.accepts("alice", ""));
        for _ in 0..TOKENS_PER_OWNER {
            tokens.mint("alice");
        }
        assert!(!tokens.accepts("alice", &a), "the oldest is forgotten");
    }

    #[test]
    fn owner_names() {
        for good in ["default", "a", "team-1.prod_x", &"x".repeat(64)] {
            assert!(check_owner("owner", good).is_ok(), "{good}");
        }
        for (bad, says) in [
            ("", "is empty"),
            (&*"x".repeat(65), "65 characters"),
            ("a b", "' '"),
            ("a/b", "'/'"),
            ("é", "'é'"),
        ] {
            let e = check_owner("owner", bad).unwrap_err().to_string();
            assert!(e.starts_with("`owner`: ") && e.contains(says), "{bad}: {e}");
        }
    }
}
