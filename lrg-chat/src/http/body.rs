//! Request bodies, read strictly: one JSON value and nothing after it, an
//! object wherever a route takes an object (serde's derived structs would
//! also take an array of the fields in order), and unknown fields refused
//! by each body type's `deny_unknown_fields`. Every refusal is a 400 that
//! names the field when there is one.

use axum::body::Body;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer as _, Visitor};
use serde_json::Value;

use super::error::ApiError;

/// Read a JSON body of at most `limit` bytes as a `T` (see the [module
/// docs](self)); an empty body reads as `{}`.
pub(crate) async fn read_json<T: DeserializeOwned>(
    limit: usize,
    body: Body,
) -> Result<T, ApiError> {
    use axum::body::HttpBody as _;
    // A declared length over the limit is refused before a byte is read,
    // rather than after the client sent (or trickled) the limit's worth.
    let declared = body.size_hint().lower();
    if usize::try_from(declared).map_or(true, |n| n > limit) {
        return Err(ApiError::too_large(format!(
            "the request body is over {limit} bytes"
        )));
    }
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|e| {
        if is_length_limit(&e) {
            ApiError::too_large(format!("the request body is over {limit} bytes"))
        } else {
            ApiError::bad_body("the request body could not be read")
        }
    })?;
    parse_json(&bytes)
}

/// Parse `bytes` as a `T` (see the [module docs](self)).
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    // `from_slice` refuses anything but whitespace after the value.
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_body(format!("the body is not the JSON this route takes: {e}"))
    })?;
    serde_path_to_error::deserialize(Strict(value)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            ApiError::bad_body(format!(
                "the body is not the JSON this route takes: {inner}"
            ))
        } else {
            ApiError::bad_request(&path, inner)
        }
    })
}

fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.to_string().contains("length limit exceeded") {
            return true;
        }
        source = e.source();
    }
    false
}

/// A JSON value read as a Rust type the way `serde_json::Value` is, except
/// that a struct is read only from an object, at any depth.
struct Strict(Value);

type Error = serde_json::Error;

impl<'de> de::Deserializer<'de> for Strict {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Items(items.into_iter())),
            Value::Object(map) => visitor.visit_map(Fields {
                iter: map.into_iter(),
                value: None,
            }),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(Strict(other)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(Fields {
                iter: map.into_iter(),
                value: None,
            }),
            Value::Array(_) => Err(de::Error::invalid_type(de::Unexpected::Seq, &visitor)),
            other => other.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        // The bodies' enums are plain names ("auto_read", "deny"): nothing
        // inside them to hold to the object rule.
        self.0.deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map identifier
        ignored_any
    }
}

struct Items(std::vec::IntoIter<Value>);

impl<'de> de::SeqAccess<'de> for Items {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(Strict(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Fields {
    iter: serde_json::map::IntoIter,
    value: Option<Value>,
}

impl<'de> de::MapAccess<'de> for Fields {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.iter.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(key.into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(Strict(value)),
            None => Err(de::Error::custom("a value was asked for before its key")),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        a: u32,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        text: String,
        #[serde(default)]
        inner: Option<Inner>,
        #[serde(default)]
        list: Vec<Inner>,
        #[serde(default)]
        map: BTreeMap<String, Option<u8>>,
    }

    fn message(body: &str) -> String {
        parse_json::<Outer>(body.as_bytes())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn objects_are_read_as_ever() {
        let v: Outer = parse_json(
            br#" {"text": "hi", "inner": {"a": 1}, "list": [{"a": 2}], "map": {"x": null, "y": 3}} "#,
        )
        .unwrap();
        assert_eq!(v.inner, Some(Inner { a: 1 }));
        assert_eq!(v.list, [Inner { a: 2 }]);
        assert_eq!(v.map.get("y"), Some(&Some(3)));
        let v: Outer = parse_json(br#"{"text": "hi", "inner": null}"#).unwrap();
        assert_eq!(v.inner, None);
    }

    #[test]
    fn strictness() {
        // Trailing garbage, at the top and after whitespace.
        assert!(message(r#"{"text": "a"} x"#).contains("trailing"));
        assert!(message(r#"{"text": "a"}{}"#).contains("trailing"));
        // An array where an object goes, at the top and inside.
        assert!(message(r#"["a"]"#).contains("sequence"));
        let m = message(r#"{"text": "a", "inner": [1]}"#);
        assert!(m.contains("`inner`") && m.contains("sequence"), "{m}");
        let m = message(r#"{"text": "a", "list": [[1]]}"#);
        assert!(m.contains("list[0]"), "{m}");
        // Unknown fields, named.
        let m = message(r#"{"text": "a", "inner": {"a": 1, "b": 2}}"#);
        assert!(m.contains("inner") && m.contains("`b`"), "{m}");
        assert!(message(r#"{"txt": "a"}"#).contains("txt"));
        // Wrong types name the field.
        assert!(message(r#"{"text": 5}"#).contains("text"));
        assert!(message(r#"{"text": "a", "map": {"x": 300}}"#).contains("map.x"));
    }
}
