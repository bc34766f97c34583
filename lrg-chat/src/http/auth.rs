//! Tokens and origins: who may use a route.

use axum::http::{HeaderMap, header};
use base64::Engine as _;
use rand::RngCore as _;

/// A fresh random token: 256 bits from the operating system's generator
/// (through rand's CSPRNG), base64url without padding.
pub(crate) fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Compare two tokens in time that depends only on their lengths, so a
/// caller cannot find a token byte by byte from response times.
pub(crate) fn same_token(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The Bearer token of a request, if it has one.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether the request's `Origin` (if any) is one of `allowed`. A request
/// without `Origin` comes from a script or a same-origin navigation, not
/// from another site's page, and passes.
pub(crate) fn origin_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    match headers.get(header::ORIGIN) {
        None => true,
        Some(origin) => origin
            .to_str()
            .map(|o| allowed.iter().any(|a| a.eq_ignore_ascii_case(o)))
            .unwrap_or(false),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_and_distinct() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert!(same_token(&a, &a.clone()));
        assert!(!same_token(&a, &b));
        assert!(!same_token(&a, &a[1..]));
    }

    #[test]
    fn bearer_and_origin() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        let allowed = vec!["http://127.0.0.1:8080".to_string()];
        assert!(origin_allowed(&h, &allowed));
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(!origin_allowed(&h, &allowed));
        h.insert(header::ORIGIN, "http://127.0.0.1:8080".parse().unwrap());
        assert!(origin_allowed(&h, &allowed));
    }
}
