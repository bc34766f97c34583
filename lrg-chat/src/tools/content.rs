//! MCP tool results as conversation parts.
//!
//! Text stays text and images become [`Part::Image`] (decoded from base64).
//! Content a model cannot take as such (audio, binary resources) becomes a
//! one-line text description, so the model knows it exists. Resource links
//! and embedded resources are also kept typed ([`ResourceRef`], in
//! [`ToolOutput::resources`]) for front ends, and a link's text tells the
//! model how to read it (`read_mcp_resource`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use lrg_providers::{Image, Part};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde::{Deserialize, Serialize};

use super::ToolOutput;

/// A resource a tool result links to (`resource_link`) or embeds
/// (`resource`), as `tool_done` carries it for front ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceRef {
    /// The server that returned it: what `read_mcp_resource` takes.
    pub server: String,
    /// Its URI.
    pub uri: String,
    /// Its name, for a link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its MIME type, when said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// What it is, for a link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its contents came in the result (an embedded resource), rather than
    /// only a link to them.
    #[serde(default)]
    pub embedded: bool,
}

/// Convert one MCP call result of server `server`. Structured content is
/// kept whole and, unless the text already carries it, added as JSON text.
pub fn output_from_mcp(result: CallToolResult, server: &str) -> ToolOutput {
    let is_error = result.is_error == Some(true);
    let mut resources = Vec::new();
    let mut parts = Vec::with_capacity(result.content.len());
    for block in result.content {
        match block {
            ContentBlock::ResourceLink(link) => {
                parts.push(link_part(&link, server));
                resources.push(ResourceRef {
                    server: server.to_owned(),
                    uri: link.uri.clone(),
                    name: Some(link.name.clone()),
                    mime_type: link.mime_type.clone(),
                    description: link.description.clone(),
                    embedded: false,
                });
            }
            ContentBlock::Resource(r) => {
                let (uri, mime_type) = match &r.resource {
                    ResourceContents::TextResourceContents { uri, mime_type, .. }
                    | ResourceContents::BlobResourceContents { uri, mime_type, .. } => {
                        (uri.clone(), mime_type.clone())
                    }
                    #[allow(unreachable_patterns)]
                    _ => (String::new(), None),
                };
                if !uri.is_empty() {
                    resources.push(ResourceRef {
                        server: server.to_owned(),
                        uri,
                        name: None,
                        mime_type,
                        description: None,
                        embedded: true,
                    });
                }
                parts.push(part_from_block(ContentBlock::Resource(r)));
            }
            other => parts.push(part_from_block(other)),
        }
    }
    if parts.is_empty() && result.structured_content.is_none() {
        parts.push(Part::text(if is_error {
            "The tool failed without saying why."
        } else {
            "The tool returned no content."
        }));
    }
    let mut out = ToolOutput {
        parts,
        is_error,
        warning: None,
        structured: result.structured_content,
        resources,
    };
    super::mcp::show_structured(&mut out);
    out
}

/// A resource link as the model reads it: what it is and how to read it.
fn link_part(link: &rmcp::model::Resource, server: &str) -> Part {
    let mut s = format!("[resource link: {} <{}>", link.name, link.uri);
    if let Some(m) = &link.mime_type {
        s.push_str(&format!(" ({m})"));
    }
    if let Some(d) = &link.description {
        s.push_str(&format!(": {d}"));
    }
    let args = serde_json::json!({"server": server, "uri": link.uri});
    s.push_str(&format!("; read it with read_mcp_resource {args}]"));
    Part::text(s)
}

/// One content block as a part (a link without its server: see
/// `link_part` for results).
pub(crate) fn part_from_block(block: ContentBlock) -> Part {
    match block {
        ContentBlock::Text(t) => Part::text(t.text),
        ContentBlock::Image(img) => image_part(&img.data, img.mime_type, "image"),
        ContentBlock::Audio(a) => {
            let size = decoded_len(&a.data);
            Part::text(format!("[audio {}, {size} bytes, not shown]", a.mime_type))
        }
        ContentBlock::Resource(r) => match r.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => {
                let mime = mime_type.map(|m| format!(" ({m})")).unwrap_or_default();
                Part::text(format!("[resource {uri}{mime}]\n{text}"))
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => match mime_type {
                Some(m) if m.starts_with("image/") => image_part(&blob, m, &uri),
                m => Part::text(format!(
                    "[resource {uri} ({}), {} bytes of binary data, not shown]",
                    m.as_deref().unwrap_or("unknown type"),
                    decoded_len(&blob)
                )),
            },
            // ResourceContents is non-exhaustive: describe what we cannot read.
            #[allow(unreachable_patterns)]
            _ => Part::text("[embedded resource of an unknown kind, not shown]"),
        },
        ContentBlock::ResourceLink(link) => {
            let mut s = format!("[resource link: {} <{}>", link.name, link.uri);
            if let Some(m) = &link.mime_type {
                s.push_str(&format!(" ({m})"));
            }
            if let Some(d) = &link.description {
                s.push_str(&format!(": {d}"));
            }
            s.push(']');
            Part::text(s)
        }
        #[allow(unreachable_patterns)]
        _ => Part::text("[content of a kind this client does not know, not shown]"),
    }
}

fn image_part(data: &str, mime: String, what: &str) -> Part {
    match STANDARD.decode(data.trim()) {
        Ok(bytes) => Part::Image(Image {
            mime,
            data: Bytes::from(bytes),
        }),
        Err(e) => Part::text(format!("[{what} ({mime}) could not be decoded: {e}]")),
    }
}

fn decoded_len(b64: &str) -> usize {
    let t = b64.trim();
    let pad = t.bytes().rev().take_while(|b| *b == b'=').count();
    (t.len() / 4) * 3 - pad.min(2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::Resource;

    #[test]
    fn maps_each_kind() {
        let png = STANDARD.encode([0x89, b'P', b'N', b'G']);
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("hello"),
            ContentBlock::image(png, "image/png"),
            ContentBlock::audio(STANDARD.encode([0u8; 9]), "audio/wav"),
            ContentBlock::embedded_text("file:///a.txt", "inside"),
            ContentBlock::image("not base64!", "image/jpeg"),
            ContentBlock::resource_link(
                Resource::new("file:///b.csv", "b.csv").with_mime_type("text/csv"),
            ),
        ]);
        result.is_error = Some(true);
        let out = output_from_mcp(result, "files");
        assert!(out.is_error);
        assert_eq!(out.parts[0], Part::text("hello"));
        match &out.parts[1] {
            Part::Image(img) => {
                assert_eq!(img.mime, "image/png");
                assert_eq!(&img.data[..], &[0x89, b'P', b'N', b'G']);
            }
            other => panic!("expected an image, got {other:?}"),
        }
        assert_eq!(
            out.parts[2],
            Part::text("[audio audio/wav, 9 bytes, not shown]")
        );
        assert_eq!(
            out.parts[3],
            Part::text("[resource file:///a.txt (text/plain)]\ninside")
        );
        let Part::Text { text } = &out.parts[4] else {
            panic!("expected text")
        };
        assert!(
            text.starts_with("[image (image/jpeg) could not be decoded"),
            "{text}"
        );
        assert_eq!(
            out.parts[5],
            Part::text(
                "[resource link: b.csv <file:///b.csv> (text/csv); read it with \
                 read_mcp_resource {\"server\":\"files\",\"uri\":\"file:///b.csv\"}]"
            )
        );
        // Both resources are kept typed, for front ends.
        assert_eq!(out.resources.len(), 2);
        assert_eq!(out.resources[0].uri, "file:///a.txt");
        assert!(out.resources[0].embedded);
        assert_eq!(out.resources[1].name.as_deref(), Some("b.csv"));
        assert_eq!(out.resources[1].server, "files");
        assert!(!out.resources[1].embedded);
    }

    #[test]
    fn structured_only_and_empty_results() {
        let out = output_from_mcp(
            CallToolResult::structured(serde_json::json!({"sum": 3})),
            "s",
        );
        // rmcp's `structured` also fills `content` with the JSON text, so
        // it is not added twice.
        assert!(!out.is_error);
        assert_eq!(out.parts.len(), 1);
        assert_eq!(out.structured, Some(serde_json::json!({"sum": 3})));
        // Structured content alone still reaches the model.
        let mut only = CallToolResult::success(vec![]);
        only.structured_content = Some(serde_json::json!({"sum": 4}));
        let out = output_from_mcp(only, "s");
        assert_eq!(out.parts, vec![Part::text("{\"sum\":4}")]);
        let empty = output_from_mcp(CallToolResult::success(vec![]), "s");
        assert_eq!(
            empty.parts,
            vec![Part::text("The tool returned no content.")]
        );
    }
}
