//! Rendering a conversation for a local engine: the system message with its
//! tools and answer-format sections, tool results as user turns, and the
//! model's own earlier turns as the JSON it wrote.

use serde::Serialize;
use serde_json::{Map, Value};

use super::answer_schema::{ANALYSIS_MAX_CHARS, OfferedTool, REPLY_MAX_CHARS};
use super::engine::{EngineMessage, EngineRole, IMAGE_SLOT};
use crate::typed::OutputSchema;
use crate::{Image, Message, Part, Role, ToolCall, ToolResult};

/// Render the whole conversation: the system message first, then the history,
/// with only the newest `max_images` images attached.
pub(crate) fn render(
    system: Option<&str>,
    tools: &[OfferedTool],
    typed: Option<&OutputSchema>,
    messages: &[Message],
    max_images: usize,
) -> Vec<EngineMessage> {
    // Older images become the shared `[image omitted]` placeholder text: each
    // image costs hundreds of tokens of a small context.
    let messages = crate::images::limit_images(messages, max_images);
    let mut drafts = vec![Draft {
        role: EngineRole::System,
        pieces: vec![Piece::Text(system_text(system, tools, typed))],
    }];
    drafts.extend(history(&messages));
    finish(drafts)
}

// ---------------------------------------------------------------- system message

fn system_text(
    system: Option<&str>,
    tools: &[OfferedTool],
    typed: Option<&OutputSchema>,
) -> String {
    let mut out = String::new();
    if let Some(system) = system.map(str::trim).filter(|s| !s.is_empty()) {
        out.push_str(system);
        out.push_str("\n\n");
    }
    if !tools.is_empty() {
        tools_section(tools, &mut out);
    }
    format_section(!tools.is_empty(), typed, &mut out);
    out
}

/// One argument of one tool, as listed in the prompt.
struct Argument {
    name: String,
    /// The argument's schema as the tool declared it: two tools share an
    /// argument when name and this are equal.
    declared: Value,
    kind: String,
    description: String,
    need: Need,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    Required,
    Optional,
    /// Required in some of the tool's choices: exactly one of these.
    Choice,
}

fn tools_section(tools: &[OfferedTool], out: &mut String) {
    let per_tool: Vec<Vec<Argument>> = tools.iter().map(arguments).collect();

    // An argument is shared when several tools declare it identically.
    let mut seen: Vec<(&Argument, usize)> = Vec::new();
    for argument in per_tool.iter().flatten() {
        match seen
            .iter_mut()
            .find(|(a, _)| a.name == argument.name && a.declared == argument.declared)
        {
            Some((_, count)) => *count += 1,
            None => seen.push((argument, 1)),
        }
    }
    let shared: Vec<&Argument> = seen
        .iter()
        .filter(|(_, n)| *n > 1)
        .map(|(a, _)| *a)
        .collect();
    let is_shared = |a: &Argument| {
        shared
            .iter()
            .any(|s| s.name == a.name && s.declared == a.declared)
    };

    out.push_str("# Tools\n\nYou can call one of these tools at a time. Each argument is listed as: name (type, whether it is required): meaning.\n");
    if !shared.is_empty() {
        out.push_str("\nArguments shared by several tools (same meaning wherever they appear):\n");
        for argument in &shared {
            out.push_str(&format!("- {} ({})", argument.name, argument.kind));
            push_description(&argument.description, out);
        }
    }
    for (tool, arguments) in tools.iter().zip(&per_tool) {
        out.push_str(&format!("\n## {}\n", tool.spec.name));
        let description = tool.spec.description.trim();
        if !description.is_empty() {
            out.push_str(description);
            out.push('\n');
        }
        if arguments.is_empty() {
            out.push_str("- (no arguments: call it with {})\n");
        }
        for argument in arguments {
            let need = match argument.need {
                Need::Required => "required",
                Need::Optional => "optional",
                Need::Choice => "choice",
            };
            if is_shared(argument) {
                out.push_str(&format!("- {} (shared, {need})\n", argument.name));
            } else {
                out.push_str(&format!("- {} ({}, {need})", argument.name, argument.kind));
                push_description(&argument.description, out);
            }
        }
        let choice: Vec<&str> = arguments
            .iter()
            .filter(|a| a.need == Need::Choice)
            .map(|a| a.name.as_str())
            .collect();
        if !choice.is_empty() {
            out.push_str(&format!("Give exactly one of: {}.\n", choice.join(", ")));
        }
    }
    out.push('\n');
}

fn push_description(description: &str, out: &mut String) {
    if !description.is_empty() {
        out.push_str(": ");
        out.push_str(description);
    }
    out.push('\n');
}

fn format_section(with_tools: bool, typed: Option<&OutputSchema>, out: &mut String) {
    // A typed answer's reply is the JSON itself, not a string holding it.
    let reply_form = if typed.is_some() {
        "{\"analysis\": \"<your reasoning>\", \"reply\": <your answer as JSON>}"
    } else {
        "{\"analysis\": \"<your reasoning>\", \"reply\": \"<your answer>\"}"
    };
    out.push_str("# Answer format\n\nAnswer with one JSON object and nothing else");
    if with_tools {
        out.push_str(", in one of two forms:\n");
        out.push_str("- to call a tool: {\"analysis\": \"<your reasoning>\", \"call\": {\"<tool name>\": {<arguments>}}}\n");
        out.push_str("- to answer the user: ");
        out.push_str(reply_form);
        out.push('\n');
        out.push_str(
            "Call one tool per answer. Its result comes back in the next user message, starting \"Result of <tool name>:\".\n",
        );
    } else {
        out.push_str(":\n");
        out.push_str(reply_form);
        out.push('\n');
    }
    match typed {
        Some(schema) => {
            out.push_str(&format!(
                "Keep \"analysis\" brief (at most {ANALYSIS_MAX_CHARS} characters). \"reply\" is a JSON value matching this JSON Schema: "
            ));
            out.push_str(&serde_json::to_string(schema.schema()).unwrap_or_default());
        }
        None => out.push_str(&format!(
            "Keep \"analysis\" brief (at most {ANALYSIS_MAX_CHARS} characters); \"reply\" holds at most {REPLY_MAX_CHARS} characters."
        )),
    }
}

/// The arguments of a tool in the order it declares them, typed from the shaped
/// schema (references resolved) and described from the declared one (shaping
/// drops descriptions).
fn arguments(tool: &OfferedTool) -> Vec<Argument> {
    let declared_schema = &tool.spec.input_schema;
    let declared = declared_schema.get("properties").and_then(Value::as_object);
    // A schema whose root is an `anyOf` of whole objects declares its
    // arguments in the alternatives: list those like choices.
    let variants: Vec<&Value> = tool
        .branches
        .iter()
        .flat_map(
            |branch| match branch.get("anyOf").and_then(Value::as_array) {
                Some(alternatives)
                    if branch.get("properties").is_none() && !alternatives.is_empty() =>
                {
                    alternatives.iter().collect()
                }
                _ => vec![branch],
            },
        )
        .collect();
    let branch_properties: Vec<&Map<String, Value>> = variants
        .iter()
        .filter_map(|b| b.get("properties").and_then(Value::as_object))
        .collect();

    let mut names: Vec<&String> = declared
        .into_iter()
        .flat_map(|p| p.keys())
        .filter(|name| branch_properties.iter().any(|p| p.contains_key(*name)))
        .collect();
    for properties in &branch_properties {
        for name in properties.keys() {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }

    names
        .into_iter()
        .map(|name| {
            let shaped = branch_properties
                .iter()
                .find_map(|p| p.get(name))
                .cloned()
                .unwrap_or(Value::Null);
            let declared_property =
                declared_property(declared_schema, name).unwrap_or_else(|| shaped.clone());
            let required_in = variants.iter().filter(|b| requires(b, name)).count();
            let need = if required_in == variants.len() {
                Need::Required
            } else if required_in == 0 {
                Need::Optional
            } else {
                Need::Choice
            };
            Argument {
                name: name.clone(),
                kind: type_text(&shaped, 0),
                description: describe(&declared_property, declared_schema),
                declared: declared_property,
                need,
            }
        })
        .collect()
}

/// The property `name` as the tool declared it: at the root, or in one of
/// the root's alternatives.
fn declared_property(schema: &Value, name: &str) -> Option<Value> {
    let alternatives = ["anyOf", "oneOf"]
        .into_iter()
        .filter_map(|k| schema.get(k).and_then(Value::as_array))
        .flatten();
    std::iter::once(schema)
        .chain(alternatives)
        .find_map(|s| s.get("properties")?.get(name))
        .cloned()
}

fn requires(schema: &Value, name: &str) -> bool {
    schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name)))
}

/// The property's description on one line, following a local `$ref` when the
/// property itself has none.
fn describe(property: &Value, root: &Value) -> String {
    let mut description = property.get("description").and_then(Value::as_str);
    if description.is_none()
        && let Some(reference) = property.get("$ref").and_then(Value::as_str)
        && let Some(path) = reference.strip_prefix('#')
    {
        description = root
            .pointer(path)
            .and_then(|t| t.get("description"))
            .and_then(Value::as_str);
    }
    description
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A short human-readable type: `string`, `array of integer`,
/// `one of "a", "b"`, `object {x: number, y: number}`.
fn type_text(schema: &Value, depth: usize) -> String {
    if depth > 2 {
        return "value".into();
    }
    if let Some(value) = schema.get("const") {
        return compact(value);
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        return format!(
            "one of {}",
            values.iter().map(compact).collect::<Vec<_>>().join(", ")
        );
    }
    if let Some(Value::Array(alternatives)) = schema.get("anyOf").or_else(|| schema.get("oneOf")) {
        let mut kinds: Vec<String> = Vec::new();
        for kind in alternatives.iter().map(|a| type_text(a, depth + 1)) {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        return kinds.join(" or ");
    }
    match schema.get("type") {
        Some(Value::String(kind)) => match kind.as_str() {
            "array" => match schema.get("items") {
                Some(items) if items.is_object() => {
                    format!("array of {}", type_text(items, depth + 1))
                }
                _ => "array".into(),
            },
            "object" => match schema.get("properties").and_then(Value::as_object) {
                Some(properties) if !properties.is_empty() => format!(
                    "object {{{}}}",
                    properties
                        .iter()
                        .map(|(k, v)| format!("{k}: {}", type_text(v, depth + 1)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => "object".into(),
            },
            other => other.into(),
        },
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    }
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

// ---------------------------------------------------------------- history

enum Piece {
    Text(String),
    Image(Image),
}

struct Draft {
    role: EngineRole,
    pieces: Vec<Piece>,
}

fn history(messages: &[Message]) -> Vec<Draft> {
    let mut drafts = Vec::new();
    let mut index = 0;
    while let Some(message) = messages.get(index) {
        index += 1;
        match message.role {
            Role::User => drafts.push(user_draft(message)),
            Role::Tool => {
                let results: Vec<&ToolResult> = results_of(message).collect();
                drafts.push(results_draft(&results));
            }
            Role::Assistant => {
                let calls: Vec<&ToolCall> = message.tool_calls().collect();
                // The results of this turn's calls, when they follow it, are
                // interleaved call by call: that is how a local model, which
                // makes one call per answer, would have seen them.
                let mut results: Vec<&ToolResult> = Vec::new();
                if !calls.is_empty()
                    && let Some(next) = messages.get(index).filter(|m| m.role == Role::Tool)
                {
                    results.extend(results_of(next));
                    index += 1;
                }
                assistant_drafts(message, &calls, results, &mut drafts);
            }
        }
    }
    drafts
}

fn results_of(message: &Message) -> impl Iterator<Item = &ToolResult> {
    message.parts.iter().filter_map(|p| match p {
        Part::ToolResult(r) => Some(r),
        _ => None,
    })
}

fn user_draft(message: &Message) -> Draft {
    let mut pieces = Vec::new();
    for part in &message.parts {
        match part {
            Part::Text { text } => pieces.push(Piece::Text(text.clone())),
            Part::Image(image) => pieces.push(Piece::Image(image.clone())),
            Part::ToolResult(result) => pieces.extend(result_pieces(result)),
            Part::Reasoning { .. } | Part::ToolCall(_) | Part::Native(_) => {}
        }
    }
    Draft {
        role: EngineRole::User,
        pieces,
    }
}

fn results_draft(results: &[&ToolResult]) -> Draft {
    let mut pieces = Vec::new();
    for result in results {
        if !pieces.is_empty() {
            pieces.push(Piece::Text(String::new()));
        }
        pieces.extend(result_pieces(result));
    }
    Draft {
        role: EngineRole::User,
        pieces,
    }
}

/// `Result of <tool>: <text>` (or `Result of <tool> (error): …`), then the
/// result's images.
fn result_pieces(result: &ToolResult) -> Vec<Piece> {
    let mut text = String::new();
    let mut images = Vec::new();
    for part in &result.parts {
        match part {
            Part::Text { text: t } => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&compact_json_text(t));
            }
            Part::Image(image) => images.push(Piece::Image(image.clone())),
            _ => {}
        }
    }
    if text.trim().is_empty() {
        text = "(no output)".into();
    }
    let marker = if result.is_error { " (error)" } else { "" };
    let mut pieces = vec![Piece::Text(format!(
        "Result of {}{marker}: {text}",
        result.name
    ))];
    pieces.extend(images);
    pieces
}

/// JSON text re-serialized without indentation (pretty-printed results waste
/// the small context of a local model); anything else unchanged.
fn compact_json_text(text: &str) -> String {
    let trimmed = text.trim();
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && let Ok(value) = serde_json::from_str::<Value>(trimmed)
    {
        return compact(&value);
    }
    text.to_string()
}

/// The JSON a local model writes; field order is the answer schema's.
#[derive(Serialize)]
struct CallAnswer<'a> {
    analysis: &'a str,
    call: Map<String, Value>,
}

#[derive(Serialize)]
struct ReplyAnswer<'a> {
    analysis: &'a str,
    reply: &'a str,
}

fn assistant_drafts(
    message: &Message,
    calls: &[&ToolCall],
    mut results: Vec<&ToolResult>,
    out: &mut Vec<Draft>,
) {
    let join = |reasoning: bool| {
        message
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Reasoning { text } if reasoning => Some(text.as_str()),
                Part::Text { text } if !reasoning => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (reasoning, text) = (join(true), join(false));
    let assistant = |json: String| Draft {
        role: EngineRole::Assistant,
        pieces: vec![Piece::Text(json)],
    };

    if calls.is_empty() {
        out.push(assistant(compact_serialize(&ReplyAnswer {
            analysis: &reasoning,
            reply: &text,
        })));
        return;
    }
    // A call answer has no reply: text written beside a call (by a cloud model)
    // is part of the reasoning that led to it.
    let analysis = [reasoning, text]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    for (i, call) in calls.iter().enumerate() {
        let mut tool = Map::new();
        tool.insert(call.name.clone(), call.arguments.clone());
        let analysis = if i == 0 { analysis.as_str() } else { "" };
        out.push(assistant(compact_serialize(&CallAnswer {
            analysis,
            call: tool,
        })));
        let (mine, rest): (Vec<&ToolResult>, Vec<&ToolResult>) =
            results.into_iter().partition(|r| r.call_id == call.id);
        results = rest;
        if !mine.is_empty() {
            out.push(results_draft(&mine));
        }
    }
    if !results.is_empty() {
        out.push(results_draft(&results));
    }
}

fn compact_serialize<T: Serialize>(value: &T) -> String {
    // Serializing strings and JSON values into a String cannot fail.
    serde_json::to_string(value).unwrap_or_default()
}

// ---------------------------------------------------------------- assembly

/// Merge consecutive user drafts (some chat templates require roles to
/// alternate) and join their text, each image standing on its own line as an
/// [`IMAGE_SLOT`].
fn finish(drafts: Vec<Draft>) -> Vec<EngineMessage> {
    let mut merged: Vec<Draft> = Vec::with_capacity(drafts.len());
    for draft in drafts {
        match merged.last_mut() {
            Some(last) if last.role == EngineRole::User && draft.role == EngineRole::User => {
                if !last.pieces.is_empty() && !draft.pieces.is_empty() {
                    last.pieces.push(Piece::Text(String::new()));
                }
                last.pieces.extend(draft.pieces);
            }
            _ => merged.push(draft),
        }
    }

    merged
        .into_iter()
        .map(|draft| {
            let mut texts: Vec<String> = Vec::new();
            let mut images = Vec::new();
            for piece in draft.pieces {
                match piece {
                    // A slot character in written text would be read as an
                    // image's place; it carries nothing a reader needs.
                    Piece::Text(text) if text.contains(IMAGE_SLOT) => {
                        texts.push(text.replace(IMAGE_SLOT, ""));
                    }
                    Piece::Text(text) => texts.push(text),
                    Piece::Image(image) => {
                        texts.push(IMAGE_SLOT.to_string());
                        images.push(image);
                    }
                }
            }
            EngineMessage {
                role: draft.role,
                content: texts.join("\n"),
                images,
            }
        })
        .collect()
}
