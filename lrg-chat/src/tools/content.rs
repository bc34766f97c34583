//! MCP tool results as conversation parts.
//!
//! Text stays text and images become [`Part::Image`] (decoded from base64).
//! Content a model cannot take as such (audio, binary resources, resource
//! links) becomes a one-line text description, so the model knows it exists.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use lrg_providers::{Image, Part};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use super::ToolOutput;

/// Convert one MCP call result.
pub fn output_from_mcp(result: CallToolResult) -> ToolOutput {
    let is_error = result.is_error == Some(true);
    let mut parts: Vec<Part> = result.content.into_iter().map(part_from_block).collect();
    if parts.is_empty() {
        // Only structured content (or nothing): the model still needs to read it.
        match result.structured_content {
            Some(v) => parts.push(Part::text(v.to_string())),
            None => parts.push(Part::text(if is_error {
                "The tool failed without saying why."
            } else {
                "The tool returned no content."
            })),
        }
    }
    ToolOutput {
        parts,
        is_error,
        warning: None,
    }
}

fn part_from_block(block: ContentBlock) -> Part {
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
        let out = output_from_mcp(result);
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
            Part::text("[resource link: b.csv <file:///b.csv> (text/csv)]")
        );
    }

    #[test]
    fn structured_only_and_empty_results() {
        let out = output_from_mcp(CallToolResult::structured(serde_json::json!({"sum": 3})));
        // rmcp's `structured` also fills `content` with the JSON text.
        assert!(!out.is_error);
        assert_eq!(out.parts.len(), 1);
        let empty = output_from_mcp(CallToolResult::success(vec![]));
        assert_eq!(
            empty.parts,
            vec![Part::text("The tool returned no content.")]
        );
    }
}
