//! Images in a conversation: the budget of cloud models (every turn sends the
//! whole conversation again and is billed for it, so only the newest few
//! images stay attached and older ones become a short text placeholder), and
//! the notes a model that cannot see images gets in their place.

use std::borrow::Cow;

use crate::{Image, Message, Part};

/// How many images a cloud model keeps attached (the newest ones).
pub const CLOUD_IMAGE_LIMIT: usize = 4;

/// What an image beyond the budget is replaced with.
pub const IMAGE_PLACEHOLDER: &str = "[image omitted]";

/// The conversation with at most `keep` images attached: the newest `keep`
/// images (counting those inside tool results) stay, every older one becomes a
/// [`IMAGE_PLACEHOLDER`] text part in its place.
///
/// Borrows the input unchanged when it is within the budget, so the common
/// case costs one scan and no copy.
pub fn limit_images(messages: &[Message], keep: usize) -> Cow<'_, [Message]> {
    let total: usize = messages.iter().map(|m| count_images(&m.parts)).sum();
    if total <= keep {
        return Cow::Borrowed(messages);
    }
    // Images are numbered oldest first; the first `total - keep` are dropped.
    let mut to_drop = total - keep;
    let limited = messages
        .iter()
        .map(|m| Message {
            role: m.role,
            parts: replace_images(&m.parts, &mut to_drop, &|_| IMAGE_PLACEHOLDER.into()),
        })
        .collect();
    Cow::Owned(limited)
}

/// The conversation for a model that cannot see images: each image becomes a
/// short note of what it was ([`image_note`]), so the chat goes on instead of
/// failing. Borrows the input when it holds no image.
pub fn describe_images(messages: &[Message]) -> Cow<'_, [Message]> {
    let mut total: usize = messages.iter().map(|m| count_images(&m.parts)).sum();
    if total == 0 {
        return Cow::Borrowed(messages);
    }
    let described = messages
        .iter()
        .map(|m| Message {
            role: m.role,
            parts: replace_images(&m.parts, &mut total, &image_note),
        })
        .collect();
    Cow::Owned(described)
}

/// A note standing for an image a model is not shown:
/// `[image/png 640×480, not shown to this model]`, with the pixel size when
/// the header tells it (PNG, GIF, JPEG), else the byte size.
pub fn image_note(image: &Image) -> String {
    let size = match dimensions(&image.data) {
        Some((w, h)) => format!("{w}×{h}"),
        None => format!("{} bytes", image.data.len()),
    };
    format!("[{} {size}, not shown to this model]", image.mime)
}

/// Width and height from the first bytes of a PNG, GIF or JPEG file.
fn dimensions(data: &[u8]) -> Option<(u32, u32)> {
    let be16 = |i: usize| {
        Some(u32::from(u16::from_be_bytes([
            *data.get(i)?,
            *data.get(i + 1)?,
        ])))
    };
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        let be32 = |i: usize| Some(u32::from_be_bytes(data.get(i..i + 4)?.try_into().ok()?));
        return Some((be32(16)?, be32(20)?));
    }
    if data.starts_with(b"GIF8") {
        let le16 = |i: usize| {
            Some(u32::from(u16::from_le_bytes([
                *data.get(i)?,
                *data.get(i + 1)?,
            ])))
        };
        return Some((le16(6)?, le16(8)?));
    }
    if data.starts_with(&[0xFF, 0xD8]) {
        // Walk the segments to the first start-of-frame marker.
        let mut i = 2;
        while *data.get(i)? == 0xFF {
            let marker = *data.get(i + 1)?;
            let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
            if is_sof {
                return Some((be16(i + 7)?, be16(i + 5)?));
            }
            i += 2 + usize::try_from(be16(i + 2)?).ok()?;
        }
    }
    None
}

/// How many images `parts` hold, those inside tool results included.
pub fn count_images(parts: &[Part]) -> usize {
    parts
        .iter()
        .map(|p| match p {
            Part::Image(_) => 1,
            Part::ToolResult(r) => count_images(&r.parts),
            _ => 0,
        })
        .sum()
}

/// `parts` with the first `left` images (in reading order, those inside tool
/// results included) replaced by the text `with` writes for each.
pub fn replace_images(
    parts: &[Part],
    left: &mut usize,
    with: &dyn Fn(&Image) -> String,
) -> Vec<Part> {
    parts
        .iter()
        .map(|p| match p {
            Part::Image(image) if *left > 0 => {
                *left -= 1;
                Part::text(with(image))
            }
            Part::ToolResult(r) if *left > 0 => {
                let mut r = r.clone();
                r.parts = replace_images(&r.parts, left, with);
                Part::ToolResult(r)
            }
            other => other.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Image, Role, ToolResult};

    fn image(tag: u8) -> Part {
        Part::Image(Image {
            mime: "image/png".into(),
            data: vec![tag].into(),
        })
    }

    fn tags(messages: &[Message]) -> Vec<String> {
        fn walk(parts: &[Part], out: &mut Vec<String>) {
            for p in parts {
                match p {
                    Part::Image(i) => out.push(format!("img{}", i.data[0])),
                    Part::Text { text } if text == IMAGE_PLACEHOLDER => out.push("omitted".into()),
                    Part::ToolResult(r) => walk(&r.parts, out),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        for m in messages {
            walk(&m.parts, &mut out);
        }
        out
    }

    #[test]
    fn within_budget_is_borrowed() {
        let msgs = vec![Message {
            role: Role::User,
            parts: vec![Part::text("hi"), image(1), image(2)],
        }];
        assert!(matches!(limit_images(&msgs, 4), Cow::Borrowed(_)));
        assert!(matches!(limit_images(&[], 0), Cow::Borrowed(_)));
    }

    #[test]
    fn oldest_images_become_placeholders_including_tool_results() {
        let result = ToolResult {
            call_id: "c1".into(),
            name: "shot".into(),
            parts: vec![Part::text("two"), image(3), image(4)],
            is_error: false,
        };
        let msgs = vec![
            Message {
                role: Role::User,
                parts: vec![image(1), Part::text("look"), image(2)],
            },
            Message {
                role: Role::Tool,
                parts: vec![Part::ToolResult(result)],
            },
            Message {
                role: Role::User,
                parts: vec![image(5), image(6)],
            },
        ];
        let limited = limit_images(&msgs, 4);
        assert_eq!(
            tags(&limited),
            ["omitted", "omitted", "img3", "img4", "img5", "img6"]
        );
        // Text around the images and the tool result's own text stay in place.
        assert_eq!(limited[0].parts[1], Part::text("look"));
        assert_eq!(limited[0].parts.len(), 3);
        let Part::ToolResult(r) = &limited[1].parts[0] else {
            panic!("tool result expected")
        };
        assert_eq!(
            (r.call_id.as_str(), r.parts[0].clone()),
            ("c1", Part::text("two"))
        );

        assert_eq!(
            tags(&limit_images(&msgs, 1)),
            [
                "omitted", "omitted", "omitted", "omitted", "omitted", "img6"
            ]
        );
        assert!(tags(&limit_images(&msgs, 0)).iter().all(|t| t == "omitted"));
    }

    #[test]
    fn a_model_without_vision_gets_notes() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        let gif = b"GIF89a\x20\x03\x58\x02".to_vec();
        let jpeg = vec![
            0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 17, 8, 0x01, 0xE0, 0x02, 0x80,
        ];
        let img = |mime: &str, data: Vec<u8>| Image {
            mime: mime.into(),
            data: data.into(),
        };
        assert_eq!(
            image_note(&img("image/png", png.clone())),
            "[image/png 640×480, not shown to this model]"
        );
        assert_eq!(
            image_note(&img("image/gif", gif)),
            "[image/gif 800×600, not shown to this model]"
        );
        assert_eq!(
            image_note(&img("image/jpeg", jpeg)),
            "[image/jpeg 640×480, not shown to this model]"
        );
        assert_eq!(
            image_note(&img("image/webp", vec![1, 2, 3])),
            "[image/webp 3 bytes, not shown to this model]"
        );
        let messages = vec![Message {
            role: Role::Tool,
            parts: vec![Part::ToolResult(ToolResult {
                call_id: "c".into(),
                name: "shot".into(),
                parts: vec![Part::Image(img("image/png", png))],
                is_error: false,
            })],
        }];
        let described = describe_images(&messages);
        let Part::ToolResult(r) = &described[0].parts[0] else {
            panic!("{described:?}")
        };
        assert_eq!(
            r.parts,
            [Part::text("[image/png 640×480, not shown to this model]")]
        );
        let plain = [Message::user("hi")];
        assert!(matches!(describe_images(&plain), Cow::Borrowed(_)));
    }
}
