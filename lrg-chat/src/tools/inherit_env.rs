//! `"inherit_env"` of a child-process server: which of lrg's environment it
//! gets beyond the base set (see the [`config`](super::config) module docs).

use serde::Serialize;
use serde_json::Value;

use super::config::kind_of;

/// How much of lrg's environment a child-process server inherits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum InheritEnv {
    /// Only the base set (the default).
    #[default]
    Base,
    /// The base set and these names (`"inherit_env": ["NAME", ...]`).
    Also(Vec<String>),
    /// Everything but lrg's own secrets (`"inherit_env": true`).
    All,
}

impl InheritEnv {
    /// Whether this is the default, the base set only.
    pub fn is_base(&self) -> bool {
        matches!(self, InheritEnv::Base)
    }

    /// Whether a variable named `name` is inherited beyond the base set
    /// (lrg's own secrets are kept out whatever this says).
    pub fn passes(&self, name: &str) -> bool {
        match self {
            InheritEnv::Base => false,
            InheritEnv::Also(names) => names.iter().any(|n| n == name),
            InheritEnv::All => true,
        }
    }
}

impl Serialize for InheritEnv {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            InheritEnv::Base => s.serialize_bool(false),
            InheritEnv::All => s.serialize_bool(true),
            InheritEnv::Also(names) => names.serialize(s),
        }
    }
}

/// `"inherit_env"`: absent, `false`, `true`, or a list of variable names.
pub(super) fn parse_inherit_env(value: Option<&Value>) -> Result<InheritEnv, String> {
    let items = match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => return Ok(InheritEnv::Base),
        Some(Value::Bool(true)) => return Ok(InheritEnv::All),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(format!(
                "\"inherit_env\" must be true, false or an array of variable names, found {}",
                kind_of(other)
            ));
        }
    };
    let mut names = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::String(name) = item else {
            return Err(format!(
                "\"inherit_env\"[{i}] must be a variable name, found {}",
                kind_of(item)
            ));
        };
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(format!(
                "\"inherit_env\"[{i}]: \"{name}\" is not a valid environment variable name"
            ));
        }
        if lrg_providers::child_env::is_lrg_secret(name) {
            return Err(format!(
                "\"inherit_env\" names {name}, one of lrg's own secrets, which no tool server \
                 inherits; set it in \"env\" if this server really needs it"
            ));
        }
        names.push(name.clone());
    }
    Ok(InheritEnv::Also(names))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_parse_and_serialize_back() {
        for (value, parsed) in [
            (json!(null), InheritEnv::Base),
            (json!(false), InheritEnv::Base),
            (json!(true), InheritEnv::All),
            (
                json!(["A", "B"]),
                InheritEnv::Also(vec!["A".into(), "B".into()]),
            ),
        ] {
            assert_eq!(parse_inherit_env(Some(&value)).unwrap(), parsed, "{value}");
        }
        assert_eq!(serde_json::to_value(InheritEnv::All).unwrap(), json!(true));
        let also = InheritEnv::Also(vec!["A".into()]);
        assert_eq!(serde_json::to_value(&also).unwrap(), json!(["A"]));
        assert!(also.passes("A") && !also.passes("B") && !InheritEnv::Base.passes("A"));
    }

    #[test]
    fn bad_values_are_refused_with_the_reason() {
        for (value, says) in [
            (json!("yes"), "must be true, false or an array"),
            (json!([""]), "not a valid environment variable name"),
            (json!(["LRG_NODE_SECRET"]), "one of lrg's own secrets"),
        ] {
            let e = parse_inherit_env(Some(&value)).unwrap_err();
            assert!(e.contains(says), "{value}: {e}");
        }
    }
}
