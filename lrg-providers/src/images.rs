//! The image budget of cloud models: every turn sends the whole conversation
//! again and is billed for it, so only the newest few images stay attached and
//! older ones become a short text placeholder.

use std::borrow::Cow;

use crate::{Message, Part};

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
            parts: replace_oldest(&m.parts, &mut to_drop),
        })
        .collect();
    Cow::Owned(limited)
}

fn count_images(parts: &[Part]) -> usize {
    parts
        .iter()
        .map(|p| match p {
            Part::Image(_) => 1,
            Part::ToolResult(r) => count_images(&r.parts),
            _ => 0,
        })
        .sum()
}

fn replace_oldest(parts: &[Part], to_drop: &mut usize) -> Vec<Part> {
    parts
        .iter()
        .map(|p| match p {
            Part::Image(_) if *to_drop > 0 => {
                *to_drop -= 1;
                Part::text(IMAGE_PLACEHOLDER)
            }
            Part::ToolResult(r) if *to_drop > 0 => {
                let mut r = r.clone();
                r.parts = replace_oldest(&r.parts, to_drop);
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
}
