//! `GET /v1/ui/chat`: the chat page. It holds no data (the chat token is in
//! the URL fragment, which browsers never send), and its
//! Content-Security-Policy allows nothing from outside: its one inline
//! script and style carry a nonce fresh for each response.
//!
//! The page is one file as served, put together once from `src/ui/`: the
//! markup and style (`chat.html`), the vendored Markdown and sanitizer
//! libraries (`ui/vendor/`, pinned, see its README) and the page's own
//! script, split by concern.

use std::sync::LazyLock;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::auth;
use super::error::ApiError;

const TEMPLATE: &str = include_str!("../ui/chat.html");

/// The vendored libraries, in the order they load.
const VENDOR: [&str; 3] = [
    include_str!("../ui/vendor/markdown-it.min.js"),
    include_str!("../ui/vendor/markdown-it-task-lists.min.js"),
    include_str!("../ui/vendor/purify.min.js"),
];

/// The page's own script, in the order it runs (`boot.js` starts it).
const SCRIPT: [&str; 11] = [
    include_str!("../ui/markdown.js"),
    include_str!("../ui/chat.js"),
    include_str!("../ui/render.js"),
    include_str!("../ui/subagents.js"),
    include_str!("../ui/questions.js"),
    include_str!("../ui/sampling.js"),
    include_str!("../ui/controls.js"),
    include_str!("../ui/prompts.js"),
    include_str!("../ui/sidebar.js"),
    include_str!("../ui/attach.js"),
    include_str!("../ui/boot.js"),
];

/// The placeholder in the page that each response fills with its nonce.
const NONCE_SLOT: &str = "{{NONCE}}";
const VENDOR_SLOT: &str = "/*{{VENDOR}}*/";
const SCRIPT_SLOT: &str = "/*{{SCRIPT}}*/";

/// The page with its scripts in place, waiting only for the nonce.
static PAGE: LazyLock<String> = LazyLock::new(assemble);

fn assemble() -> String {
    TEMPLATE
        .replacen(VENDOR_SLOT, &VENDOR.join("\n;\n"), 1)
        .replacen(SCRIPT_SLOT, &SCRIPT.join("\n"), 1)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// What is inlined cannot end the script early, nor reach into the
    /// page's placeholders.
    #[test]
    fn the_inlined_scripts_stay_inside_their_script() {
        for (i, source) in VENDOR.iter().chain(SCRIPT.iter()).enumerate() {
            let lower = source.to_ascii_lowercase();
            for bad in [
                "</script",
                "<script",
                "<!--",
                "{{nonce}}",
                "{{vendor}}",
                "{{script}}",
            ] {
                assert!(
                    !lower.contains(bad) || (bad == "<!--" && !lower.contains("<script")),
                    "inlined file {i} holds {bad}"
                );
            }
        }
    }

    #[test]
    fn the_page_is_put_together_once_with_one_script() {
        let page = assemble();
        assert!(!page.contains(VENDOR_SLOT) && !page.contains(SCRIPT_SLOT));
        assert_eq!(page.matches("<script").count(), 1);
        assert_eq!(page.matches("</script>").count(), 1);
        assert!(page.contains("markdown-it 14.1.0") && page.contains("DOMPurify 3.5.0"));
        assert_eq!(
            page.matches(NONCE_SLOT).count(),
            2,
            "the style's and the script's"
        );
    }
}
