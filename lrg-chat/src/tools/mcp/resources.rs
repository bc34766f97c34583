//! One server's resources: what it declared it offers, listing them a page
//! at a time, reading one, and subscribing to its updates; in public,
//! server-named forms ([`McpResource`], [`ResourceContents`], ...).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use rmcp::model::{PaginatedRequestParams, ReadResourceRequestParams, SubscribeRequestParams};
use serde::Serialize;
use tokio::sync::broadcast;

use super::McpServer;
use super::request::{McpRequestError, bounded};

/// What a server said at its handshake it offers besides tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ServerCaps {
    pub(crate) resources: bool,
    pub(crate) subscribe: bool,
    pub(crate) prompts: bool,
    pub(crate) completions: bool,
}

impl ServerCaps {
    pub(crate) fn of(caps: &rmcp::model::ServerCapabilities) -> Self {
        Self {
            resources: caps.resources.is_some(),
            subscribe: caps
                .resources
                .as_ref()
                .is_some_and(|r| r.subscribe == Some(true)),
            prompts: caps.prompts.is_some(),
            completions: caps.completions.is_some(),
        }
    }
}

/// One resource a server lists (`resources/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct McpResource {
    /// The server's name: what `read_mcp_resource` and
    /// [`crate::tools::ToolHost::read_resource`] take.
    pub server: String,
    /// Its URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A human-readable title, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, when the server says.
    pub mime_type: Option<String>,
    /// Its size in bytes, when the server says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// One resource template a server lists (`resources/templates/list`): a
/// URI with `{placeholders}` to fill in before reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct McpResourceTemplate {
    /// The server's name.
    pub server: String,
    /// The RFC 6570 URI template.
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// A human-readable title, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it gives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The MIME type of what it gives, when the server says.
    pub mime_type: Option<String>,
}

/// One page of a listing, and where the next begins.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Page<T> {
    /// The entries of this page.
    pub items: Vec<T>,
    /// The server's cursor for the next page; `None` on the last.
    pub next_cursor: Option<String>,
}

/// What a resource holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResourceBody {
    /// Text.
    Text(String),
    /// Bytes (decoded from the base64 the server sent).
    Blob(Bytes),
}

/// One item of what `resources/read` returned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceContents {
    /// Its URI (a read may return several, e.g. a directory's files).
    pub uri: String,
    /// Its MIME type, when the server says.
    pub mime_type: Option<String>,
    /// What it holds.
    pub body: ResourceBody,
}

/// A server's `notifications/resources/updated` for a subscribed URI
/// ([`crate::tools::ToolHost::subscribe_resource`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ResourceUpdate {
    /// The server.
    pub server: String,
    /// The URI that changed: read it again to see how.
    pub uri: String,
}

/// Where a connection's handler sends its server's resource updates.
#[derive(Clone)]
pub(crate) struct UpdateSender {
    pub(crate) server: String,
    pub(crate) tx: broadcast::Sender<ResourceUpdate>,
}

impl UpdateSender {
    /// Tell whoever listens; no listener is fine (nobody subscribed).
    pub(crate) fn send(&self, uri: String) {
        let _ = self.tx.send(ResourceUpdate {
            server: self.server.clone(),
            uri,
        });
    }
}

impl McpServer {
    /// What the server declared at its last handshake.
    pub(crate) fn caps(&self) -> ServerCaps {
        *lrg_providers::sync::read(&self.caps)
    }

    /// The live peer, connecting first, when the server offers `what`.
    pub(super) async fn peer_for(
        &self,
        what: &str,
        offered: impl Fn(ServerCaps) -> bool,
    ) -> Result<rmcp::Peer<rmcp::RoleClient>, McpRequestError> {
        let (peer, _, _) = self
            .ready()
            .await
            .map_err(|message| McpRequestError::Failed {
                server: self.name.clone(),
                message: format!("it is not available: {message}"),
            })?;
        if !offered(self.caps()) {
            return Err(McpRequestError::NotOffered {
                server: self.name.clone(),
                what: what.to_owned(),
            });
        }
        Ok(peer)
    }

    /// One page of the server's resources.
    pub(crate) async fn resource_page(
        &self,
        cursor: Option<String>,
        timeout: Duration,
    ) -> Result<Page<McpResource>, McpRequestError> {
        let peer = self.peer_for("resources", |c| c.resources).await?;
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = bounded(
            &self.name,
            "resources/list",
            timeout,
            peer.list_resources(Some(params)),
        )
        .await?;
        Ok(Page {
            items: page
                .resources
                .into_iter()
                .map(|r| McpResource {
                    server: self.name.clone(),
                    uri: r.uri,
                    name: r.name,
                    title: r.title,
                    description: r.description,
                    mime_type: r.mime_type,
                    size: r.size,
                })
                .collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// One page of the server's resource templates.
    pub(crate) async fn template_page(
        &self,
        cursor: Option<String>,
        timeout: Duration,
    ) -> Result<Page<McpResourceTemplate>, McpRequestError> {
        let peer = self.peer_for("resources", |c| c.resources).await?;
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = bounded(
            &self.name,
            "resources/templates/list",
            timeout,
            peer.list_resource_templates(Some(params)),
        )
        .await?;
        Ok(Page {
            items: page
                .resource_templates
                .into_iter()
                .map(|t| McpResourceTemplate {
                    server: self.name.clone(),
                    uri_template: t.uri_template,
                    name: t.name,
                    title: t.title,
                    description: t.description,
                    mime_type: t.mime_type,
                })
                .collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// Read `uri`. The transport's size cap applies, as for tool results.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
        timeout: Duration,
    ) -> Result<Vec<ResourceContents>, McpRequestError> {
        let peer = self.peer_for("resources", |c| c.resources).await?;
        let result = bounded(
            &self.name,
            "resources/read",
            timeout,
            peer.read_resource(ReadResourceRequestParams::new(uri)),
        )
        .await?;
        result
            .contents
            .into_iter()
            .map(|c| self.contents(c))
            .collect()
    }

    /// Ask for `notifications/resources/updated` on `uri`.
    pub(crate) async fn subscribe(
        &self,
        uri: &str,
        timeout: Duration,
    ) -> Result<(), McpRequestError> {
        let peer = self
            .peer_for("resource subscriptions", |c| c.subscribe)
            .await?;
        // The 2025 form, which the servers in use speak; a 2026-07-28
        // server takes `subscriptions/listen` instead (not used yet).
        #[allow(deprecated)]
        let request = peer.subscribe(SubscribeRequestParams::new(uri));
        bounded(&self.name, "resources/subscribe", timeout, request).await
    }

    fn contents(
        &self,
        c: rmcp::model::ResourceContents,
    ) -> Result<ResourceContents, McpRequestError> {
        match c {
            rmcp::model::ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => Ok(ResourceContents {
                uri,
                mime_type,
                body: ResourceBody::Text(text),
            }),
            rmcp::model::ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => match STANDARD.decode(blob.trim()) {
                Ok(bytes) => Ok(ResourceContents {
                    uri,
                    mime_type,
                    body: ResourceBody::Blob(Bytes::from(bytes)),
                }),
                Err(e) => Err(McpRequestError::Failed {
                    server: self.name.clone(),
                    message: format!("the data of {uri} is not valid base64: {e}"),
                }),
            },
            #[allow(unreachable_patterns)]
            _ => Err(McpRequestError::Failed {
                server: self.name.clone(),
                message: "it returned resource contents of a kind this client does not know"
                    .to_owned(),
            }),
        }
    }
}
