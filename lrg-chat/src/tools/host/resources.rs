//! Resources through the host: the library calls ([`ToolHost::resources`],
//! [`ToolHost::read_resource`], [`ToolHost::subscribe_resource`], ...) and
//! the three read-class tools the model is offered when any server has
//! resources: `list_mcp_resources {server?, cursor?}`,
//! `list_mcp_resource_templates {server?}` and `read_mcp_resource {server,
//! uri}` (codex's names).
//!
//! What the model gets is capped and says so: at most [`LIST_CAP`] entries
//! per listing (the rest a cursor away), at most [`READ_TEXT_CAP`] bytes
//! of a resource's text, and at most [`READ_ITEMS_CAP`] items of one read.

use std::sync::{Arc, LazyLock};

use lrg_providers::{Image, Part, ToolAnnotations, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::super::mcp::McpServer;
use super::super::rust_fn::input_schema_for;
use super::super::validate::ArgumentCheck;
use super::super::{
    Listing, McpRequestError, McpResource, McpResourceTemplate, Page, ResourceBody,
    ResourceContents, ResourceUpdate, ToolOutput,
};
use super::{ToolHost, read};

/// Resource updates kept for a slow listener before it misses some.
pub(super) const UPDATES_KEPT: usize = 256;
/// The most entries one listing shows the model.
pub const LIST_CAP: usize = 100;
/// The most bytes of a resource's text the model gets from one read.
pub const READ_TEXT_CAP: usize = 64 * 1024;
/// The most items (a directory's files, say) of one read the model gets.
pub const READ_ITEMS_CAP: usize = 20;
/// Pages fetched per server for a whole listing, against a server whose
/// cursor never ends.
const MAX_PAGES: usize = 100;
/// Characters of a description shown in a listing.
const DESCRIPTION_CHARS: usize = 200;

/// The tool names.
pub(crate) const LIST_RESOURCES: &str = "list_mcp_resources";
pub(crate) const LIST_TEMPLATES: &str = "list_mcp_resource_templates";
pub(crate) const READ_RESOURCE: &str = "read_mcp_resource";

/// One of the three resource tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResourceTool {
    List,
    Templates,
    Read,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// The server whose resources to list; leave out for every server.
    #[serde(default)]
    server: Option<String>,
    /// Where to continue: a `cursor` from an earlier listing of `server`.
    #[serde(default)]
    cursor: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TemplateArgs {
    /// The server whose templates to list; leave out for every server.
    #[serde(default)]
    server: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The server the resource belongs to, as listed.
    server: String,
    /// The resource's URI (from a listing, a filled-in template, or a
    /// resource link in a tool result).
    uri: String,
}

struct Compiled {
    spec: ToolSpec,
    check: ArgumentCheck,
}

fn compile<A: JsonSchema>(name: &str, description: &str) -> Compiled {
    // The argument types are ours and always objects.
    let input_schema = input_schema_for::<A>().unwrap_or_else(|_| json!({"type": "object"}));
    let check = ArgumentCheck::new(name, &input_schema);
    Compiled {
        spec: ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema,
            annotations: ToolAnnotations {
                read_only_hint: Some(true),
                destructive_hint: Some(false),
                ..Default::default()
            },
            output_schema: None,
        },
        check,
    }
}

static TOOLS: LazyLock<[Compiled; 3]> = LazyLock::new(|| {
    [
        compile::<ListArgs>(
            LIST_RESOURCES,
            "List the resources (files, records, documents) that tool servers offer, with the \
             server and URI to read each by. Without `server`, every server's first page; with \
             it, that server's page from `cursor`.",
        ),
        compile::<TemplateArgs>(
            LIST_TEMPLATES,
            "List resource templates: URIs with {placeholders} that, filled in, can be read \
             with read_mcp_resource.",
        ),
        compile::<ReadArgs>(
            READ_RESOURCE,
            "Read one resource of a tool server by its URI: from list_mcp_resources, a filled-in \
             template, or a resource link in a tool result.",
        ),
    ]
});

impl ResourceTool {
    /// All three, in the order they are offered.
    pub(crate) const ALL: [ResourceTool; 3] = [
        ResourceTool::List,
        ResourceTool::Templates,
        ResourceTool::Read,
    ];

    fn compiled(self) -> &'static Compiled {
        &TOOLS[self as usize]
    }

    /// As offered to models.
    pub(crate) fn spec(self) -> &'static ToolSpec {
        &self.compiled().spec
    }

    /// Its argument check.
    pub(crate) fn check(self) -> &'static ArgumentCheck {
        &self.compiled().check
    }
}

impl ToolHost {
    /// Whether any server declared resources: the resource tools are
    /// offered then.
    pub(super) fn offers_resources(&self) -> bool {
        read(&self.servers).iter().any(|s| s.caps().resources)
    }

    fn resource_servers(&self) -> Vec<Arc<McpServer>> {
        read(&self.servers)
            .into_iter()
            .filter(|s| s.caps().resources)
            .collect()
    }

    pub(super) fn server_named(&self, name: &str) -> Result<Arc<McpServer>, McpRequestError> {
        let servers = read(&self.servers);
        servers
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .ok_or_else(|| McpRequestError::UnknownServer {
                server: name.to_owned(),
                known: if servers.is_empty() {
                    "none".to_owned()
                } else {
                    servers
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            })
    }

    /// Connect the servers not up yet, so what they declared is known.
    pub(super) async fn connect_all(&self) {
        let servers = read(&self.servers);
        futures::future::join_all(servers.iter().map(|s| s.ensure_connected())).await;
    }

    /// Every resource of every server that has resources, all pages.
    pub async fn resources(&self) -> Listing<McpResource> {
        self.connect_all().await;
        let timeout = self.options.call_timeout;
        self.list_everywhere(|s, cursor| async move { s.resource_page(cursor, timeout).await })
            .await
    }

    /// Every resource template of every server that has resources.
    pub async fn resource_templates(&self) -> Listing<McpResourceTemplate> {
        self.connect_all().await;
        let timeout = self.options.call_timeout;
        self.list_everywhere(|s, cursor| async move { s.template_page(cursor, timeout).await })
            .await
    }

    async fn list_everywhere<T, F, Fut>(&self, page: F) -> Listing<T>
    where
        F: Fn(Arc<McpServer>, Option<String>) -> Fut,
        Fut: std::future::Future<Output = Result<Page<T>, McpRequestError>>,
    {
        let mut listing = Listing::default();
        for server in self.resource_servers() {
            let mut cursor = None;
            for _ in 0..MAX_PAGES {
                match page(server.clone(), cursor.take()).await {
                    Ok(p) => {
                        listing.items.extend(p.items);
                        match p.next_cursor {
                            Some(c) => cursor = Some(c),
                            None => break,
                        }
                    }
                    Err(e) => {
                        listing.failures.push(e);
                        break;
                    }
                }
            }
        }
        listing
    }

    /// Read `uri` of `server`.
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<Vec<ResourceContents>, McpRequestError> {
        self.server_named(server)?
            .read_resource(uri, self.options.call_timeout)
            .await
    }

    /// Ask `server` to tell when `uri` changes: each
    /// `notifications/resources/updated` then comes out of
    /// [`ToolHost::resource_updates`] (and a chat session on this host
    /// publishes a `resource_updated` event). Needs a server that declared
    /// `resources.subscribe`.
    pub async fn subscribe_resource(&self, server: &str, uri: &str) -> Result<(), McpRequestError> {
        self.server_named(server)?
            .subscribe(uri, self.options.call_timeout)
            .await
    }

    /// The resource updates of every server, from now on. A listener that
    /// falls more than 256 behind misses the oldest.
    pub fn resource_updates(&self) -> broadcast::Receiver<ResourceUpdate> {
        self.resource_updates.subscribe()
    }

    /// Run one of the resource tools; every failure is a result the model
    /// can read.
    pub(super) async fn call_resource_tool(
        &self,
        which: ResourceTool,
        args: &serde_json::Map<String, Value>,
    ) -> ToolOutput {
        let args = Value::Object(args.clone());
        let bad = |e: serde_json::Error| {
            ToolOutput::error(format!(
                "Invalid arguments for `{}`: {e}\n{}",
                which.spec().name,
                which.check().expected()
            ))
        };
        match which {
            ResourceTool::List => match serde_json::from_value::<ListArgs>(args) {
                Ok(a) => self.list_tool(a).await,
                Err(e) => bad(e),
            },
            ResourceTool::Templates => match serde_json::from_value::<TemplateArgs>(args) {
                Ok(a) => self.templates_tool(a).await,
                Err(e) => bad(e),
            },
            ResourceTool::Read => match serde_json::from_value::<ReadArgs>(args) {
                Ok(a) => self.read_tool(a).await,
                Err(e) => bad(e),
            },
        }
    }

    /// The servers a listing covers: the one named, or every resource server.
    fn listed(&self, server: Option<&str>) -> Result<Vec<Arc<McpServer>>, McpRequestError> {
        match server {
            Some(name) => self.server_named(name).map(|s| vec![s]),
            None => Ok(self.resource_servers()),
        }
    }

    async fn list_tool(&self, args: ListArgs) -> ToolOutput {
        let servers = match self.listed(args.server.as_deref()) {
            Ok(s) => s,
            Err(e) => return ToolOutput::error(format!("{e}.")),
        };
        let (offset, server_cursor) = match args.cursor.as_deref().map(parse_cursor) {
            None => (0, None),
            Some(Ok(c)) => c,
            Some(Err(message)) => return ToolOutput::error(message),
        };
        if args.cursor.is_some() && args.server.is_none() {
            return ToolOutput::error(
                "A `cursor` continues one server's listing: give its `server` too.",
            );
        }
        let timeout = self.options.call_timeout;
        let mut shown: Vec<Value> = Vec::new();
        let mut more: Vec<Value> = Vec::new();
        let mut errors: Vec<String> = Vec::new();
        for server in servers {
            if shown.len() >= LIST_CAP {
                more.push(json!({"server": server.name}));
                continue;
            }
            let page = match server.resource_page(server_cursor.clone(), timeout).await {
                Ok(p) => p,
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            };
            let room = LIST_CAP - shown.len();
            let rest: Vec<McpResource> = page.items.into_iter().skip(offset).collect();
            let taken = rest.len().min(room);
            shown.extend(rest.iter().take(taken).map(resource_row));
            if taken < rest.len() {
                // Cut inside the server's page: continue from the next entry.
                more.push(json!({"server": server.name,
                    "cursor": make_cursor(offset + taken, server_cursor.as_deref())}));
            } else if let Some(next) = page.next_cursor {
                more.push(json!({"server": server.name, "cursor": make_cursor(0, Some(&next))}));
            }
        }
        let mut body = json!({"resources": shown});
        if !more.is_empty() {
            body["more"] = json!(more);
            body["note"] = json!(format!(
                "At most {LIST_CAP} resources are listed at a time: call list_mcp_resources with a \
                 `server` and its `cursor` from `more` for the rest."
            ));
        }
        finish(body, errors)
    }

    async fn templates_tool(&self, args: TemplateArgs) -> ToolOutput {
        let servers = match self.listed(args.server.as_deref()) {
            Ok(s) => s,
            Err(e) => return ToolOutput::error(format!("{e}.")),
        };
        let timeout = self.options.call_timeout;
        let mut shown: Vec<Value> = Vec::new();
        let mut errors = Vec::new();
        let mut cut = false;
        'servers: for server in servers {
            let mut cursor = None;
            for _ in 0..MAX_PAGES {
                match server.template_page(cursor.take(), timeout).await {
                    Ok(p) => {
                        for t in p.items {
                            if shown.len() >= LIST_CAP {
                                cut = true;
                                break 'servers;
                            }
                            shown.push(json!({
                                "server": t.server,
                                "uriTemplate": t.uri_template,
                                "name": t.name,
                                "mimeType": t.mime_type,
                                "description": t.description.as_deref().map(clip),
                            }));
                        }
                        match p.next_cursor {
                            Some(c) => cursor = Some(c),
                            None => break,
                        }
                    }
                    Err(e) => {
                        errors.push(e.to_string());
                        break;
                    }
                }
            }
        }
        let mut body = json!({"resourceTemplates": shown});
        if cut {
            body["note"] = json!(format!(
                "Only the first {LIST_CAP} templates are listed; name a `server` to see its own."
            ));
        }
        finish(body, errors)
    }

    async fn read_tool(&self, args: ReadArgs) -> ToolOutput {
        match self.read_resource(&args.server, &args.uri).await {
            Ok(contents) => read_output(&args.server, &args.uri, contents),
            Err(e) => ToolOutput::error(format!("The resource {} was not read: {e}.", args.uri)),
        }
    }
}

/// A listing's entry as the model reads it.
fn resource_row(r: &McpResource) -> Value {
    let mut row =
        json!({"server": r.server, "uri": r.uri, "name": r.name, "mimeType": r.mime_type});
    if let Some(d) = &r.description {
        row["description"] = json!(clip(d));
    }
    if let Some(size) = r.size {
        row["size"] = json!(size);
    }
    row
}

fn clip(text: &str) -> String {
    lrg_providers::text::clip(text, DESCRIPTION_CHARS)
}

/// The JSON of a listing, and the servers that failed (a listing with
/// nothing but failures is an error).
fn finish(mut body: Value, errors: Vec<String>) -> ToolOutput {
    let empty = body
        .as_object()
        .and_then(|o| o.values().next())
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty);
    if !errors.is_empty() {
        body["errors"] = json!(errors);
    }
    let mut out = ToolOutput::text(body.to_string());
    out.is_error = empty && !errors.is_empty();
    out
}

/// Our cursor: where in the server's page to go on (`offset`) and the
/// server's own cursor for that page, so a page longer than [`LIST_CAP`]
/// is shown in parts.
fn make_cursor(offset: usize, server_cursor: Option<&str>) -> String {
    format!("{offset}|{}", server_cursor.unwrap_or_default())
}

fn parse_cursor(cursor: &str) -> Result<(usize, Option<String>), String> {
    let bad = || {
        format!(
            "`{cursor}` is not a cursor from list_mcp_resources: pass the `cursor` of its `more` \
             entries unchanged."
        )
    };
    let (offset, rest) = cursor.split_once('|').ok_or_else(bad)?;
    let offset = offset.parse::<usize>().map_err(|_| bad())?;
    Ok((offset, (!rest.is_empty()).then(|| rest.to_owned())))
}

/// What `read_mcp_resource` gives the model: text as text (capped),
/// images as images, other bytes as a line saying what they are.
pub(crate) fn read_output(server: &str, uri: &str, contents: Vec<ResourceContents>) -> ToolOutput {
    if contents.is_empty() {
        return ToolOutput::text(format!("The resource {uri} of `{server}` is empty."));
    }
    let total = contents.len();
    let mut parts = Vec::new();
    for c in contents.into_iter().take(READ_ITEMS_CAP) {
        let mime = c.mime_type.as_deref().unwrap_or("unknown type");
        match c.body {
            ResourceBody::Text(text) => {
                let (shown, cut) = cap_text(&text, READ_TEXT_CAP);
                let mut s = format!("[resource {} ({mime})]\n{shown}", c.uri);
                if cut {
                    s.push_str(&format!(
                        "\n[cut: the resource has {} bytes of text; only the first {READ_TEXT_CAP} \
                         are shown]",
                        text.len()
                    ));
                }
                parts.push(Part::text(s));
            }
            ResourceBody::Blob(bytes) if mime.starts_with("image/") => {
                parts.push(Part::text(format!("[resource {} ({mime})]", c.uri)));
                parts.push(Part::Image(Image {
                    mime: mime.to_owned(),
                    data: bytes,
                }));
            }
            ResourceBody::Blob(bytes) => parts.push(Part::text(format!(
                "[resource {} ({mime}), {} bytes of binary data, not shown]",
                c.uri,
                bytes.len()
            ))),
            #[allow(unreachable_patterns)]
            _ => parts.push(Part::text(format!(
                "[resource {} of a kind this client does not know, not shown]",
                c.uri
            ))),
        }
    }
    if total > READ_ITEMS_CAP {
        parts.push(Part::text(format!(
            "[the read returned {total} items; only the first {READ_ITEMS_CAP} are shown]"
        )));
    }
    ToolOutput::from(parts)
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn cap_text(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    (&text[..cut], true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_named() {
        assert_eq!(
            parse_cursor(&make_cursor(5, Some("abc|d"))),
            Ok((5, Some("abc|d".into())))
        );
        assert_eq!(parse_cursor(&make_cursor(0, None)), Ok((0, None)));
        let e = parse_cursor("nonsense").unwrap_err();
        assert!(e.contains("`nonsense` is not a cursor"), "{e}");
    }

    #[test]
    fn text_is_capped_at_a_character_boundary_and_says_so() {
        let big = "é".repeat(READ_TEXT_CAP); // two bytes each
        let out = read_output(
            "s",
            "file:///big",
            vec![ResourceContents {
                uri: "file:///big".into(),
                mime_type: Some("text/plain".into()),
                body: ResourceBody::Text(big),
            }],
        );
        let Part::Text { text } = &out.parts[0] else {
            panic!("text expected")
        };
        assert!(text.len() < READ_TEXT_CAP + 200);
        assert!(
            text.ends_with(&format!(
                "[cut: the resource has {} bytes of text; only the first {READ_TEXT_CAP} are shown]",
                READ_TEXT_CAP * 2
            )),
            "{}",
            &text[text.len() - 120..]
        );
    }

    #[test]
    fn blobs_are_images_or_a_note() {
        let out = read_output(
            "s",
            "x",
            vec![
                ResourceContents {
                    uri: "x.png".into(),
                    mime_type: Some("image/png".into()),
                    body: ResourceBody::Blob(bytes::Bytes::from_static(b"\x89PNG")),
                },
                ResourceContents {
                    uri: "x.bin".into(),
                    mime_type: None,
                    body: ResourceBody::Blob(bytes::Bytes::from_static(b"abc")),
                },
            ],
        );
        assert!(matches!(&out.parts[1], Part::Image(i) if i.mime == "image/png"));
        assert_eq!(
            out.parts[2],
            Part::text("[resource x.bin (unknown type), 3 bytes of binary data, not shown]")
        );
    }
}
