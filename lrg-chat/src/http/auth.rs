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

/// The fewest characters an agent token may have: 32, what `openssl rand
/// -hex 16` prints (128 bits).
pub(crate) const MIN_TOKEN_CHARS: usize = 32;

/// Whether `host` (a `Host` header or a URI authority: name or address,
/// with any port) names this machine's loopback: `localhost`, an address of
/// 127.0.0.0/8, or `[::1]`. A page of another site that rebinds its own
/// name to 127.0.0.1 still sends that name, and is refused.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let host = host.trim();
    // `[v6]:port`, `[v6]`, `name:port`, `v4:port`, `name`.
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((v6, "")) => v6,
            Some((v6, port)) if port.strip_prefix(':').is_some_and(is_port) => v6,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        }
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn is_port(port: &str) -> bool {
    !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok()
}

/// Whether a request comes to a loopback name (see [`is_loopback_host`]).
/// A request without a `Host` (HTTP/1.0 from a script) passes: browsers,
/// which DNS rebinding works through, always send one.
/// An absolute-form target (`GET http://name/…`) names its host too, and
/// hyper routes by it: both must be loopback names.
pub(crate) fn host_allowed(headers: &HeaderMap, uri: &axum::http::Uri) -> bool {
    let header_ok = headers
        .get(header::HOST)
        .is_none_or(|host| host.to_str().is_ok_and(is_loopback_host));
    header_ok && uri.authority().is_none_or(|a| is_loopback_host(a.as_str()))
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
    fn loopback_hosts() {
        for host in [
            "localhost",
            "LOCALHOST:8377",
            "127.0.0.1",
            "127.0.0.1:1",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8377",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8377",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:80",
            "[::2]:80",
            "[::1]x",
            "[::1]8377",
            "localhost:+80",
            "localhost:x",
            "",
            "::1",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
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
