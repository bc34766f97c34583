//! Requests to a server other than tool calls (resources, prompts,
//! completions): one error type and one way to bound them in time.

use std::future::Future;
use std::time::Duration;

use rmcp::service::ServiceError;

/// A resource, prompt or completion request that did not get an answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum McpRequestError {
    /// No server of this name was added.
    #[error("there is no tool server `{server}` (servers: {known})")]
    UnknownServer {
        /// The name asked for.
        server: String,
        /// The servers there are, comma-separated (or "none").
        known: String,
    },
    /// The server does not offer this (it did not declare the capability).
    #[error("tool server `{server}` does not offer {what}")]
    NotOffered {
        /// The server.
        server: String,
        /// What was asked for ("resources", "prompts", "completions", ...).
        what: String,
    },
    /// The request was not right (an unknown prompt, a missing argument).
    #[error("{message}")]
    Invalid {
        /// What was wrong, naming the part.
        message: String,
    },
    /// The server could not be reached, or answered with an error.
    #[error("tool server `{server}`: {message}")]
    Failed {
        /// The server.
        server: String,
        /// What went wrong (never header or environment values).
        message: String,
    },
    /// The server did not answer in time.
    #[error("tool server `{server}` did not answer {what} within {secs} s")]
    TimedOut {
        /// The server.
        server: String,
        /// The request, e.g. `resources/read`.
        what: String,
        /// The limit, in seconds.
        secs: f64,
    },
}

/// Run `request` for `server` within `timeout`, naming what failed.
pub(crate) async fn bounded<T>(
    server: &str,
    what: &str,
    timeout: Duration,
    request: impl Future<Output = Result<T, ServiceError>>,
) -> Result<T, McpRequestError> {
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(ServiceError::McpError(e))) if e.code.0 == super::super::capped::OVERSIZED => {
            // Our transport dropped the answer for its size, as it does a
            // tool result's.
            let bytes = e
                .data
                .as_ref()
                .and_then(|d| d.get("bytes"))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
            Err(McpRequestError::Failed {
                server: server.to_owned(),
                message: format!(
                    "the answer to {what} ({bytes} bytes) is larger than a result may be, so it \
                     was dropped unread"
                ),
            })
        }
        Ok(Err(ServiceError::McpError(e))) => Err(McpRequestError::Failed {
            server: server.to_owned(),
            message: format!("{what} failed: {}", e.message),
        }),
        Ok(Err(e)) => Err(McpRequestError::Failed {
            server: server.to_owned(),
            message: format!("{what} failed: {e}"),
        }),
        Err(_) => Err(McpRequestError::TimedOut {
            server: server.to_owned(),
            what: what.to_owned(),
            secs: timeout.as_secs_f64(),
        }),
    }
}

/// What every server together gave for a listing, and the servers that
/// could not give theirs (the others' entries are still there).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Listing<T> {
    /// The entries, servers in the order they were added.
    pub items: Vec<T>,
    /// The servers whose part is missing, and why.
    pub failures: Vec<McpRequestError>,
}

impl<T> Default for Listing<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            failures: Vec::new(),
        }
    }
}
