//! `GET /v1/ui/chat`: the chat page. It holds no data (the chat token is in
//! the URL fragment, which browsers never send), and its
//! Content-Security-Policy allows nothing from outside: its one inline
//! script and style carry a nonce fresh for each response.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::auth;
use super::error::ApiError;

const PAGE: &str = include_str!("../ui/chat.html");

/// The placeholder in the page that each response fills with its nonce.
const NONCE_SLOT: &str = "{{NONCE}}";

pub(crate) async fn page() -> Response {
    let nonce = auth::new_token();
    let html = PAGE.replace(NONCE_SLOT, &nonce);
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         img-src blob: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    );
    let mut response = html.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    match HeaderValue::from_str(&csp) {
        Ok(csp) => {
            headers.insert(header::CONTENT_SECURITY_POLICY, csp);
            response
        }
        // Never serve the page without its policy.
        Err(_) => ApiError::internal("the page could not be served").into_response(),
    }
}
