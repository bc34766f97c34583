//! Where a hosted API adapter sends (its base URL and host), and the API key
//! header it sends with.

use reqwest::header::HeaderValue;

use crate::{ApiKey, ProviderError};

/// `url` trimmed, without trailing slashes or a trailing `api_path` (such as
/// `/v1`), checked to be an http(s) URL with a host. `provider` and `var` (the
/// environment variable that sets it) name what to fix in the error.
pub(crate) fn normalize_base(
    url: &str,
    api_path: &str,
    provider: &str,
    var: &str,
) -> Result<String, ProviderError> {
    let url = url.trim().trim_end_matches('/');
    let url = url.strip_suffix(api_path).unwrap_or(url);
    if is_http_url(url) {
        Ok(url.to_string())
    } else {
        Err(ProviderError::Config {
            message: format!("the {provider} base URL `{url}` is not an http(s) URL (check {var})"),
        })
    }
}

/// Reject a base URL reqwest could not use, naming it (it never holds a key).
pub(crate) fn check_base_url(base_url: &str) -> Result<(), ProviderError> {
    if is_http_url(base_url) {
        Ok(())
    } else {
        Err(ProviderError::Config {
            message: format!("invalid base URL {base_url:?}: expected http(s)://host[:port]/path"),
        })
    }
}

/// Whether `url` is an http(s) URL with a host: the one test every base URL
/// passes.
fn is_http_url(url: &str) -> bool {
    reqwest::Url::parse(url)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
}

/// The host of `url`, when it parses and has one.
pub(crate) fn host_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
}

/// The host a conversation goes to, or `None` when it stays on this machine.
pub(crate) fn sends_to(base_url: &str) -> Option<String> {
    let host = host_of(base_url)?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified());
    (!loopback).then(|| bare.to_string())
}

/// `key` as a header value marked sensitive, so HTTP logging never shows it.
pub(crate) fn key_header(key: &ApiKey, provider: &str) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(key.expose()).map_err(|_| ProviderError::Config {
        message: format!("the {provider} API key holds characters an HTTP header cannot carry"),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_lose_the_api_path_and_bad_ones_name_the_variable() {
        assert_eq!(
            normalize_base(" https://api.x.com/v1/ ", "/v1", "X", "X_URL").unwrap(),
            "https://api.x.com"
        );
        let err = normalize_base("ftp://x", "/v1", "X", "X_URL").unwrap_err();
        assert!(err.to_string().contains("X_URL"), "{err}");
        assert_eq!(host_of("http://h:1/p").as_deref(), Some("h"));
        assert_eq!(host_of("nope"), None);
    }

    #[test]
    fn key_headers_are_sensitive_and_reject_newlines() {
        assert!(key_header(&ApiKey::new("k"), "X").unwrap().is_sensitive());
        let err = key_header(&ApiKey::new("a\nb"), "X").unwrap_err();
        assert!(!err.to_string().contains("a\nb"), "{err}");
    }
}
