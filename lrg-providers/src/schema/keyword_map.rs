//! A schema object with the keywords the grammar shaper reads found in one
//! pass over its keys.
//!
//! Most keywords are absent from most schema objects, and asking the map for
//! each one would hash its name every time (the shaper asks about twenty
//! questions per object). One scan of the entries answers all of them and
//! keeps the values found, so nothing is hashed.

use serde_json::{Map, Value};

/// The keywords [`KeywordMap`] tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kw {
    Type,
    Enum,
    Const,
    Properties,
    PatternProperties,
    Required,
    AdditionalProperties,
    Items,
    PrefixItems,
    AdditionalItems,
    MinItems,
    MaxItems,
    MinLength,
    MaxLength,
    Pattern,
    AnyOf,
    OneOf,
    AllOf,
}

impl Kw {
    /// Every tracked keyword, in declaration order.
    const ALL: [Kw; 18] = [
        Kw::Type,
        Kw::Enum,
        Kw::Const,
        Kw::Properties,
        Kw::PatternProperties,
        Kw::Required,
        Kw::AdditionalProperties,
        Kw::Items,
        Kw::PrefixItems,
        Kw::AdditionalItems,
        Kw::MinItems,
        Kw::MaxItems,
        Kw::MinLength,
        Kw::MaxLength,
        Kw::Pattern,
        Kw::AnyOf,
        Kw::OneOf,
        Kw::AllOf,
    ];

    /// The keyword's name in a schema.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kw::Type => "type",
            Kw::Enum => "enum",
            Kw::Const => "const",
            Kw::Properties => "properties",
            Kw::PatternProperties => "patternProperties",
            Kw::Required => "required",
            Kw::AdditionalProperties => "additionalProperties",
            Kw::Items => "items",
            Kw::PrefixItems => "prefixItems",
            Kw::AdditionalItems => "additionalItems",
            Kw::MinItems => "minItems",
            Kw::MaxItems => "maxItems",
            Kw::MinLength => "minLength",
            Kw::MaxLength => "maxLength",
            Kw::Pattern => "pattern",
            Kw::AnyOf => "anyOf",
            Kw::OneOf => "oneOf",
            Kw::AllOf => "allOf",
        }
    }

    fn of(name: &str) -> Option<Kw> {
        // A match compiles to a switch on the length, then one comparison.
        Some(match name {
            "type" => Kw::Type,
            "enum" => Kw::Enum,
            "const" => Kw::Const,
            "properties" => Kw::Properties,
            "patternProperties" => Kw::PatternProperties,
            "required" => Kw::Required,
            "additionalProperties" => Kw::AdditionalProperties,
            "items" => Kw::Items,
            "prefixItems" => Kw::PrefixItems,
            "additionalItems" => Kw::AdditionalItems,
            "minItems" => Kw::MinItems,
            "maxItems" => Kw::MaxItems,
            "minLength" => Kw::MinLength,
            "maxLength" => Kw::MaxLength,
            "pattern" => Kw::Pattern,
            "anyOf" => Kw::AnyOf,
            "oneOf" => Kw::OneOf,
            "allOf" => Kw::AllOf,
            _ => return None,
        })
    }

    fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// A schema object, the values of the tracked keywords it has, and which of
/// them it has not read yet.
pub(crate) struct KeywordMap<'m> {
    map: &'m Map<String, Value>,
    values: [Option<&'m Value>; Kw::ALL.len()],
    present: u32,
}

impl<'m> KeywordMap<'m> {
    /// Scans `map`'s entries once.
    pub(crate) fn new(map: &'m Map<String, Value>) -> Self {
        let mut values = [None; Kw::ALL.len()];
        let mut present = 0;
        for (key, value) in map {
            if let Some(kw) = Kw::of(key) {
                present |= kw.bit();
                values[kw as usize] = Some(value);
            }
        }
        Self {
            map,
            values,
            present,
        }
    }

    /// The whole object.
    pub(crate) fn source(&self) -> &'m Map<String, Value> {
        self.map
    }

    /// Whether `kw` is present (and not taken yet).
    pub(crate) fn has(&self, kw: Kw) -> bool {
        self.present & kw.bit() != 0
    }

    /// Whether any of `kws` is present.
    pub(crate) fn has_any(&self, kws: &[Kw]) -> bool {
        kws.iter().any(|kw| self.has(*kw))
    }

    /// The value of `kw`, if present.
    pub(crate) fn get(&self, kw: Kw) -> Option<&'m Value> {
        if self.has(kw) {
            self.values[kw as usize]
        } else {
            None
        }
    }

    /// The value of `kw`, if present, which then counts as handled: `has`
    /// says no from now on.
    pub(crate) fn take(&mut self, kw: Kw) -> Option<&'m Value> {
        let value = self.get(kw);
        self.present &= !kw.bit();
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => unreachable!("a test passes an object"),
        }
    }

    #[test]
    fn names_round_trip_and_bits_are_distinct() {
        let mut seen = 0u32;
        for kw in Kw::ALL {
            assert_eq!(Kw::of(kw.name()), Some(kw));
            assert_eq!(seen & kw.bit(), 0, "{kw:?} shares a bit");
            seen |= kw.bit();
        }
        assert_eq!(Kw::of("description"), None);
    }

    #[test]
    fn take_removes_and_forgets() {
        let object = object(json!({"type": "string", "description": "x", "enum": ["a"]}));
        let mut map = KeywordMap::new(&object);
        assert!(map.has(Kw::Type) && map.has(Kw::Enum) && !map.has(Kw::Const));
        assert_eq!(map.take(Kw::Enum), Some(&json!(["a"])));
        assert!(!map.has(Kw::Enum));
        assert_eq!(map.take(Kw::Enum), None);
        assert_eq!(map.get(Kw::Type), Some(&json!("string")));
    }
}
