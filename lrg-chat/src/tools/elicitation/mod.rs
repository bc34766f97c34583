//! The forms an MCP server may ask a person to fill in (`elicitation/create`
//! in form mode), read from the spec's restricted schema subset, and the
//! check of an answer against them.
//!
//! The subset is a flat object whose properties are each one of: a string
//! (with `format` `email`, `uri`, `date` or `date-time`, `minLength`,
//! `maxLength`), a number or integer (`minimum`, `maximum`), a boolean, a
//! single-select enum (`enum`, `enum` with the legacy `enumNames`, or
//! titled `oneOf: [{const, title}]`) or a multi-select enum (`type:
//! "array"` whose `items` hold `enum` or `anyOf: [{const, title}]`, with
//! `minItems`/`maxItems`). Anything else (a nested object, an unknown
//! type) is refused with [`SchemaError`] naming the property, so a front
//! end never has to draw what it cannot check.
//!
//! [`Form::check`] is what every front end's answer goes through: the
//! library refuses a bad one with a [`FieldError`] naming the field, and
//! the question stays open.

use serde::Serialize;
use serde_json::{Map, Value};

mod formats;
use formats::format_ok;

/// A form a server asks a person to fill in.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Form {
    /// Its fields, in the order the schema lists them.
    pub fields: Vec<Field>,
}

/// One field of a [`Form`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Field {
    /// The property's name: the key of its value in the answer.
    pub name: String,
    /// What to call it, when the schema says.
    pub title: Option<String>,
    /// What it is for, when the schema says.
    pub description: Option<String>,
    /// Whether an answer must have it.
    pub required: bool,
    /// What values it takes.
    pub kind: FieldKind,
    /// The value to offer first, when the schema gives a valid one.
    pub default: Option<Value>,
}

/// What values a [`Field`] takes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum FieldKind {
    /// A string.
    Text {
        /// The format it must have.
        format: Option<TextFormat>,
        /// The fewest characters.
        min_length: Option<u64>,
        /// The most characters.
        max_length: Option<u64>,
    },
    /// A number; `integer` when it must be whole.
    Number {
        /// Whether only whole numbers are taken.
        integer: bool,
        /// The smallest value.
        minimum: Option<f64>,
        /// The largest value.
        maximum: Option<f64>,
    },
    /// True or false.
    Boolean,
    /// One of a list.
    Choice {
        /// The values allowed.
        options: Vec<Choice>,
    },
    /// Several of a list.
    Choices {
        /// The values allowed.
        options: Vec<Choice>,
        /// The fewest picked.
        min_items: Option<u64>,
        /// The most picked.
        max_items: Option<u64>,
    },
}

/// One value of a [`FieldKind::Choice`] or [`FieldKind::Choices`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Choice {
    /// The value sent to the server.
    pub value: String,
    /// What a person sees, when the schema names it.
    pub title: Option<String>,
}

/// A string format of [`FieldKind::Text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TextFormat {
    /// `name@example.com`.
    Email,
    /// An absolute URI (`https://example.com/a`).
    Uri,
    /// `2026-12-31`.
    Date,
    /// `2026-12-31T23:59:00Z`.
    DateTime,
}

impl TextFormat {
    /// Its name in JSON Schema.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Email => "email",
            Self::Uri => "uri",
            Self::Date => "date",
            Self::DateTime => "date-time",
        }
    }
}

/// A requested schema outside the subset: the question is declined with
/// this as the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SchemaError {
    /// What is wrong, naming the property.
    pub message: String,
}

/// An answer that does not fit the form: the question stays open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The field that is wrong.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// The most fields a form may have: a person answers each one.
const MAX_FIELDS: usize = 100;

impl Form {
    /// Read a requested schema; refused when it is outside the subset.
    pub fn parse(schema: &Value) -> Result<Form, SchemaError> {
        let fail = |message: String| Err(SchemaError { message });
        let Some(schema) = schema.as_object() else {
            return fail("the requested schema is not a JSON object".to_owned());
        };
        if let Some(t) = schema.get("type")
            && t != "object"
        {
            return fail(format!(
                "the requested schema must be of type \"object\", not {t}"
            ));
        }
        let properties = match schema.get("properties") {
            None => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return fail("its \"properties\" is not an object".to_owned()),
        };
        if properties.len() > MAX_FIELDS {
            return fail(format!(
                "it has {} fields; at most {MAX_FIELDS} are asked",
                properties.len()
            ));
        }
        let required: Vec<&str> = match schema.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            Some(_) => return fail("its \"required\" is not a list".to_owned()),
        };
        if let Some(missing) = required.iter().find(|r| !properties.contains_key(**r)) {
            return fail(format!(
                "it requires \"{missing}\", which it does not describe"
            ));
        }
        let mut fields = Vec::with_capacity(properties.len());
        for (name, property) in &properties {
            let field = parse_field(name, property, required.contains(&name.as_str())).map_err(
                |message| SchemaError {
                    message: format!("field \"{name}\": {message}"),
                },
            )?;
            fields.push(field);
        }
        Ok(Form { fields })
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Check an answer's content: an object with a valid value for every
    /// required field and no field the form lacks (a `null` counts as
    /// left out). Returns the content as it goes to the server.
    pub fn check(&self, content: &Value) -> Result<Map<String, Value>, FieldError> {
        let Some(content) = content.as_object() else {
            return Err(FieldError {
                field: "content".to_owned(),
                message: "the answer must be a JSON object of field values".to_owned(),
            });
        };
        if let Some(unknown) = content.keys().find(|k| self.field(k).is_none()) {
            return Err(FieldError {
                field: unknown.clone(),
                message: "the form has no such field".to_owned(),
            });
        }
        let mut out = Map::new();
        for field in &self.fields {
            match content.get(&field.name) {
                None | Some(Value::Null) if field.required => {
                    return Err(FieldError {
                        field: field.name.clone(),
                        message: "is required".to_owned(),
                    });
                }
                None | Some(Value::Null) => {}
                Some(value) => {
                    let value = field.check(value).map_err(|message| FieldError {
                        field: field.name.clone(),
                        message,
                    })?;
                    out.insert(field.name.clone(), value);
                }
            }
        }
        Ok(out)
    }
}

impl Field {
    /// What to call it: its title, else its name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }

    /// Check one value; the message says what is wrong.
    pub fn check(&self, value: &Value) -> Result<Value, String> {
        match &self.kind {
            FieldKind::Text {
                format,
                min_length,
                max_length,
            } => {
                let Some(text) = value.as_str() else {
                    return Err("must be text".to_owned());
                };
                let chars = text.chars().count() as u64;
                if let Some(min) = min_length
                    && chars < *min
                {
                    return Err(format!("must be at least {min} characters long"));
                }
                if let Some(max) = max_length
                    && chars > *max
                {
                    return Err(format!("must be at most {max} characters long"));
                }
                if let Some(format) = format
                    && !format_ok(*format, text)
                {
                    return Err(format!("is not a valid {}", format_name(*format)));
                }
                Ok(value.clone())
            }
            FieldKind::Number {
                integer,
                minimum,
                maximum,
            } => {
                let Some(n) = value.as_f64() else {
                    return Err("must be a number".to_owned());
                };
                if *integer && (n.fract() != 0.0 || !n.is_finite()) {
                    return Err("must be a whole number".to_owned());
                }
                if let Some(min) = minimum
                    && n < *min
                {
                    return Err(format!("must be at least {}", show_number(*min)));
                }
                if let Some(max) = maximum
                    && n > *max
                {
                    return Err(format!("must be at most {}", show_number(*max)));
                }
                if *integer && let Some(i) = value.as_i64() {
                    return Ok(Value::from(i));
                }
                Ok(value.clone())
            }
            FieldKind::Boolean => match value {
                Value::Bool(_) => Ok(value.clone()),
                _ => Err("must be true or false".to_owned()),
            },
            FieldKind::Choice { options } => match value.as_str() {
                Some(v) if options.iter().any(|o| o.value == v) => Ok(value.clone()),
                _ => Err(format!("must be one of {}", list(options))),
            },
            FieldKind::Choices {
                options,
                min_items,
                max_items,
            } => {
                let Some(items) = value.as_array() else {
                    return Err(format!("must be a list of values from {}", list(options)));
                };
                for item in items {
                    match item.as_str() {
                        Some(v) if options.iter().any(|o| o.value == v) => {}
                        _ => return Err(format!("{item} is not one of {}", list(options))),
                    }
                }
                let n = items.len() as u64;
                if let Some(min) = min_items
                    && n < *min
                {
                    return Err(format!("needs at least {min} picked"));
                }
                if let Some(max) = max_items
                    && n > *max
                {
                    return Err(format!("takes at most {max} picked"));
                }
                Ok(value.clone())
            }
        }
    }

    /// Read what a person typed for this field (a terminal): text as it
    /// is, numbers and `true`/`false` parsed, a choice by its value, its
    /// title or its number in the list, several choices separated by
    /// commas. Then checked as [`Field::check`] does.
    pub fn parse_input(&self, input: &str) -> Result<Value, String> {
        let input = input.trim();
        let value = match &self.kind {
            FieldKind::Text { .. } => Value::String(input.to_owned()),
            FieldKind::Number { .. } => {
                let n: f64 = input
                    .parse()
                    .map_err(|_| format!("\"{input}\" is not a number"))?;
                match input.parse::<i64>() {
                    Ok(i) => Value::from(i),
                    Err(_) => serde_json::Number::from_f64(n)
                        .map(Value::Number)
                        .ok_or_else(|| format!("\"{input}\" is not a number"))?,
                }
            }
            FieldKind::Boolean => match input.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" => Value::Bool(true),
                "n" | "no" | "false" => Value::Bool(false),
                _ => return Err("answer yes or no".to_owned()),
            },
            FieldKind::Choice { options } => Value::String(pick(options, input)?),
            FieldKind::Choices { options, .. } => Value::Array(
                input
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| pick(options, s).map(Value::String))
                    .collect::<Result<_, _>>()?,
            ),
        };
        self.check(&value)
    }
}

/// The option `input` names: its value, its title, or its number from 1.
fn pick(options: &[Choice], input: &str) -> Result<String, String> {
    if let Ok(n) = input.parse::<usize>()
        && let Some(o) = n.checked_sub(1).and_then(|i| options.get(i))
    {
        return Ok(o.value.clone());
    }
    options
        .iter()
        .find(|o| o.value == input || o.title.as_deref() == Some(input))
        .map(|o| o.value.clone())
        .ok_or_else(|| format!("\"{input}\" is not one of {}", list(options)))
}

fn list(options: &[Choice]) -> String {
    let shown: Vec<String> = options
        .iter()
        .take(20)
        .map(|o| format!("\"{}\"", o.value))
        .collect();
    let more = if options.len() > 20 { ", ..." } else { "" };
    format!("{}{more}", shown.join(", "))
}

fn show_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

fn format_name(format: TextFormat) -> &'static str {
    match format {
        TextFormat::Email => "email address",
        TextFormat::Uri => "URI (such as https://example.com)",
        TextFormat::Date => "date (YYYY-MM-DD)",
        TextFormat::DateTime => "date and time (YYYY-MM-DDTHH:MM:SSZ)",
    }
}

fn parse_field(name: &str, p: &Value, required: bool) -> Result<Field, String> {
    let Some(p) = p.as_object() else {
        return Err("its schema is not an object".to_owned());
    };
    let text = |key: &str| p.get(key).and_then(Value::as_str).map(str::to_owned);
    let uint = |key: &str| -> Result<Option<u64>, String> {
        match p.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("\"{key}\" must be a whole number")),
        }
    };
    let number = |key: &str| -> Result<Option<f64>, String> {
        match p.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| format!("\"{key}\" must be a number")),
        }
    };
    let kind = match p.get("type").and_then(Value::as_str) {
        Some("string") => {
            if let Some(options) = single_choices(p)? {
                FieldKind::Choice { options }
            } else {
                let format = match p.get("format").and_then(Value::as_str) {
                    None => None,
                    Some("email") => Some(TextFormat::Email),
                    Some("uri") => Some(TextFormat::Uri),
                    Some("date") => Some(TextFormat::Date),
                    Some("date-time") => Some(TextFormat::DateTime),
                    Some(other) => {
                        return Err(format!(
                            "the string format \"{other}\" is not one of email, uri, date, date-time"
                        ));
                    }
                };
                FieldKind::Text {
                    format,
                    min_length: uint("minLength")?,
                    max_length: uint("maxLength")?,
                }
            }
        }
        Some(t @ ("number" | "integer")) => FieldKind::Number {
            integer: t == "integer",
            minimum: number("minimum")?,
            maximum: number("maximum")?,
        },
        Some("boolean") => FieldKind::Boolean,
        Some("array") => {
            let items = p
                .get("items")
                .and_then(Value::as_object)
                .ok_or("a multi-select needs \"items\" with its choices")?;
            let options = if let Some(values) = items.get("enum") {
                plain_choices(values, None)?
            } else if let Some(titled) = items.get("anyOf").or_else(|| items.get("oneOf")) {
                titled_choices(titled)?
            } else {
                return Err(
                    "a list is only asked as a multi-select: its \"items\" need \"enum\" or \"anyOf\""
                        .to_owned(),
                );
            };
            FieldKind::Choices {
                options,
                min_items: uint("minItems")?,
                max_items: uint("maxItems")?,
            }
        }
        Some("object") => {
            return Err("nested objects are not asked (the form must be flat)".to_owned());
        }
        Some(other) => return Err(format!("the type \"{other}\" is not one a form can ask")),
        None => match single_choices(p)? {
            Some(options) => FieldKind::Choice { options },
            None => return Err("it has no \"type\"".to_owned()),
        },
    };
    let mut field = Field {
        name: name.to_owned(),
        title: text("title"),
        description: text("description"),
        required,
        kind,
        default: None,
    };
    // A default the field itself would refuse is not offered.
    field.default = p.get("default").filter(|d| field.check(d).is_ok()).cloned();
    Ok(field)
}

/// The options of a single-select string (`enum`, `enum` + `enumNames`,
/// `oneOf` of `{const, title}`); `None` for a plain string.
fn single_choices(p: &Map<String, Value>) -> Result<Option<Vec<Choice>>, String> {
    if let Some(values) = p.get("enum") {
        return plain_choices(values, p.get("enumNames")).map(Some);
    }
    if let Some(titled) = p.get("oneOf").or_else(|| p.get("anyOf")) {
        return titled_choices(titled).map(Some);
    }
    Ok(None)
}

fn plain_choices(values: &Value, names: Option<&Value>) -> Result<Vec<Choice>, String> {
    let values = values.as_array().ok_or("\"enum\" must be a list")?;
    let names = names.and_then(Value::as_array);
    let options: Vec<Choice> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let value = v
                .as_str()
                .ok_or_else(|| format!("the choice {v} is not a string"))?;
            Ok(Choice {
                value: value.to_owned(),
                title: names
                    .and_then(|n| n.get(i))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        .collect::<Result<_, String>>()?;
    if options.is_empty() {
        return Err("it offers no choices".to_owned());
    }
    Ok(options)
}

fn titled_choices(titled: &Value) -> Result<Vec<Choice>, String> {
    let titled = titled.as_array().ok_or("its choices must be a list")?;
    let options: Vec<Choice> = titled
        .iter()
        .map(|c| {
            let value = c
                .get("const")
                .and_then(Value::as_str)
                .ok_or("each titled choice needs a string \"const\"")?;
            Ok(Choice {
                value: value.to_owned(),
                title: c.get("title").and_then(Value::as_str).map(str::to_owned),
            })
        })
        .collect::<Result<_, String>>()?;
    if options.is_empty() {
        return Err("it offers no choices".to_owned());
    }
    Ok(options)
}

#[cfg(test)]
mod tests;
