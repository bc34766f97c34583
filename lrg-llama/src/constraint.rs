//! The answer constraint: an llguidance [`Matcher`] compiled from a JSON
//! Schema, with whitespace not flexible, that says which tokens may come next.

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use lrg_providers::ProviderError;
use serde_json::{Value, json};
use toktrie::{SimpleVob, TokEnv, TokenId};

/// Compiles answer schemas for one vocabulary. Build it once per model: it
/// precomputes per-vocabulary tables that every grammar reuses.
pub struct ConstraintCompiler {
    factory: ParserFactory,
}

impl std::fmt::Debug for ConstraintCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConstraintCompiler")
            .field(
                "vocab_size",
                &self.factory.tok_env().tok_trie().vocab_size(),
            )
            .finish()
    }
}

impl ConstraintCompiler {
    /// A compiler for the vocabulary `tok_env`.
    ///
    /// # Errors
    /// When llguidance cannot index the vocabulary.
    pub fn new(tok_env: &TokEnv) -> Result<Self, ProviderError> {
        let mut factory = ParserFactory::new_simple(tok_env).map_err(|e| ProviderError::Other {
            message: format!("llguidance could not index the vocabulary: {e}"),
        })?;
        // llguidance logs to stderr by default; its warnings go to tracing instead.
        factory.quiet();
        Ok(Self { factory })
    }

    /// The vocabulary this compiler was built for.
    pub fn tok_env(&self) -> &TokEnv {
        self.factory.tok_env()
    }

    /// Compiles `schema` into a fresh constraint. Whitespace outside strings is
    /// not allowed, so the answer is compact JSON and no token is wasted on
    /// indentation.
    ///
    /// # Errors
    /// `BadRequest` when the schema is not one llguidance can enforce.
    pub fn compile(&self, schema: &Value) -> Result<AnswerConstraint, ProviderError> {
        let grammar = TopLevelGrammar::from_json_schema(with_compact_whitespace(schema)?);
        let mut matcher = Matcher::new(self.factory.create_parser(grammar));
        if let Some(err) = matcher.get_error() {
            return Err(ProviderError::BadRequest {
                message: format!("the answer schema cannot be enforced: {err}"),
            });
        }
        for w in matcher.grammar_warnings() {
            tracing::debug!(warning = %w, "llguidance grammar warning");
        }
        Ok(AnswerConstraint { matcher })
    }
}

/// Adds llguidance's `x-guidance` options to `schema` (keeping any it already
/// has) with `whitespace_flexible: false`.
fn with_compact_whitespace(schema: &Value) -> Result<Value, ProviderError> {
    let mut schema = schema.clone();
    let Some(obj) = schema.as_object_mut() else {
        return Err(ProviderError::BadRequest {
            message: format!("the answer schema must be a JSON object, got {schema}"),
        });
    };
    let options = obj.entry("x-guidance").or_insert_with(|| json!({}));
    match options.as_object_mut() {
        Some(o) => {
            o.insert("whitespace_flexible".into(), Value::Bool(false));
        }
        None => {
            return Err(ProviderError::BadRequest {
                message: "the answer schema's \"x-guidance\" must be an object".into(),
            });
        }
    }
    Ok(schema)
}

/// One turn's constraint: ask for the allowed tokens, commit the chosen one,
/// repeat until [`AnswerConstraint::is_finished`]. Cloning a fresh one is far
/// cheaper than compiling the schema again.
#[derive(Clone)]
pub struct AnswerConstraint {
    matcher: Matcher,
}

impl std::fmt::Debug for AnswerConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerConstraint")
            .field("stopped", &self.matcher.is_stopped())
            .finish()
    }
}

impl AnswerConstraint {
    /// The tokens allowed next; end-of-sequence tokens are allowed only where
    /// the answer may end.
    ///
    /// # Errors
    /// When the grammar is in an error state (llguidance's message).
    pub fn allowed_tokens(&mut self) -> Result<SimpleVob, ProviderError> {
        self.matcher
            .compute_mask()
            .map_err(|e| ProviderError::Other {
                message: format!("constraint error: {e}"),
            })
    }

    /// Advances the grammar by `token`, which must have been allowed.
    ///
    /// # Errors
    /// When the token was not allowed.
    pub fn commit(&mut self, token: TokenId) -> Result<(), ProviderError> {
        self.matcher
            .consume_token(token)
            .map_err(|e| ProviderError::Other {
                message: format!("constraint rejected token {token}: {e}"),
            })
    }

    /// Whether the answer is complete: nothing but end-of-sequence may follow.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }

    /// Whether the answer could end here (it is valid JSON for the schema).
    pub fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::synthetic_tok_env;

    #[test]
    fn compact_whitespace_keeps_other_options() {
        let s =
            with_compact_whitespace(&json!({"type": "string", "x-guidance": {"lenient": true}}))
                .unwrap();
        assert_eq!(
            s["x-guidance"],
            json!({"lenient": true, "whitespace_flexible": false})
        );
        assert!(with_compact_whitespace(&json!(true)).is_err());
    }

    #[test]
    fn whitespace_between_tokens_is_refused() {
        let env = synthetic_tok_env(2000, 3);
        let c = ConstraintCompiler::new(&env).unwrap();
        let mut a = c.compile(&json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})).unwrap();
        let trie = env.tok_trie();
        let brace = trie.token_id(b"{").unwrap();
        let space = trie.token_id(b" ").unwrap();
        let mask = a.allowed_tokens().unwrap();
        assert!(mask.is_allowed(brace));
        assert!(!mask.is_allowed(space));
        for t in env.tokenize_bytes(b"{\"a\":12}") {
            assert!(a.allowed_tokens().unwrap().is_allowed(t));
            a.commit(t).unwrap();
        }
        assert!(a.is_finished() || a.is_accepting());
    }

    #[test]
    fn unenforceable_schema_is_bad_request() {
        let env = synthetic_tok_env(1000, 3);
        let c = ConstraintCompiler::new(&env).unwrap();
        let err = c
            .compile(&json!({"type": "object", "properties": {"a": {"$ref": "#/nope"}}}))
            .unwrap_err();
        assert!(matches!(err, ProviderError::BadRequest { .. }), "{err:?}");
    }
}
