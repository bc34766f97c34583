//! Frame fields read without copying: strings borrow from the frame when
//! they hold no escapes, so a decoder allocates only for what it keeps.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserializer;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// An optional string field that borrows from the frame when it holds no
/// escapes: `#[serde(borrow, default, deserialize_with = "wire::borrowed_str")]`.
///
/// serde borrows a `Cow<'a, str>` field only when it is not wrapped: an
/// `Option<Cow<'a, str>>` is always copied, one allocation per field per
/// frame on the hot path of a stream.
pub(crate) fn borrowed_str<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'de, str>>, D::Error> {
    struct Borrowed<'de>(Cow<'de, str>);

    impl<'de> Deserialize<'de> for Borrowed<'de> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_str(StrVisitor).map(Borrowed)
        }
    }

    struct StrVisitor;

    impl<'de> Visitor<'de> for StrVisitor {
        type Value = Cow<'de, str>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }

        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Cow::Borrowed(v))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Cow::Owned(v.to_string()))
        }

        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Cow::Owned(v))
        }
    }

    let value: Option<Borrowed<'de>> = Deserialize::deserialize(deserializer)?;
    Ok(value.map(|b| b.0))
}

/// A field that is usually a string but may be any JSON (tool-call
/// arguments sent as an object, text sent as an array of parts), read in one
/// pass: the string borrows from the frame when it has no escapes, and only
/// other shapes become a [`Value`]. As `Option<StrOrJson>` with
/// `#[serde(borrow, default)]`, a JSON `null` reads as `None`.
///
/// The value is boxed to keep this small: decoded structs are moved a few
/// times per frame, and an inline `Value` (about 80 bytes with
/// `preserve_order`) in every such field made those moves the biggest cost
/// of decoding a tool-call fragment.
#[derive(Debug)]
pub(crate) enum StrOrJson<'a> {
    /// A JSON string, unescaped.
    Str(Cow<'a, str>),
    /// Anything else.
    Json(Box<Value>),
}

impl StrOrJson<'_> {
    fn json(value: Value) -> Self {
        StrOrJson::Json(Box::new(value))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for StrOrJson<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrOrJsonVisitor(PhantomData))
    }
}

struct StrOrJsonVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for StrOrJsonVisitor<'a> {
    type Value = StrOrJson<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(StrOrJson::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(StrOrJson::Str(Cow::Owned(v.to_string())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(StrOrJson::Str(Cow::Owned(v)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(StrOrJson::json(Value::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(StrOrJson::json(Value::Null))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(StrOrJson::json(Value::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(StrOrJson::json(Value::from(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(StrOrJson::json(Value::from(v)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(StrOrJson::json(Value::from(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(StrOrJson::json)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(StrOrJson::json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Field<'a> {
        #[serde(borrow, default)]
        f: Option<StrOrJson<'a>>,
    }

    fn read(json: &str) -> Option<StrOrJson<'_>> {
        serde_json::from_str::<Field<'_>>(json)
            .map(|f| f.f)
            .unwrap()
    }

    #[test]
    fn strings_borrow_unless_escaped_and_other_shapes_are_values() {
        assert!(matches!(
            read(r#"{"f": "plain"}"#),
            Some(StrOrJson::Str(Cow::Borrowed("plain")))
        ));
        match read(r#"{"f": "a\"b\n"}"#) {
            Some(StrOrJson::Str(Cow::Owned(s))) => assert_eq!(s, "a\"b\n"),
            other => panic!("escaped string read as {other:?}"),
        }
        assert!(read(r#"{"f": null}"#).is_none());
        assert!(read("{}").is_none());
        for json in [
            r#"{"x": [1, 2.5, true, null, {"y": "z"}]}"#,
            "[1]",
            "-3",
            "7",
            "0.5",
            "false",
        ] {
            let whole = format!(r#"{{"f": {json}}}"#);
            match read(&whole) {
                Some(StrOrJson::Json(v)) => {
                    assert_eq!(*v, serde_json::from_str::<Value>(json).unwrap(), "{json}")
                }
                other => panic!("{json} read as {other:?}"),
            }
        }
    }
}
