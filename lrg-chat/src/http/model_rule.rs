//! Which models a request may name. A model id is more than a name when its
//! provider runs a program or reads a path on the server: `acp:COMMAND`
//! starts any command, `script:`/`replay:` read a file, `llama:`/`mlx:` load
//! a model file or folder, and the agent CLIs (`claude-cli:`, ...) start a
//! program. Such an id is taken from a request only when the operator
//! offers it (an available entry of the menu, by its exact id), is the
//! server's own default, or the server allows model specs
//! ([`super::HttpConfig::allow_model_specs`], for the agent token only).
//! A chat token may switch only to an available entry of its chat's menu.
//!
//! A model behind an API (`openai:`, `ollama:`, `server:`, ...) names only a
//! model: its address is the operator's (`--base-url`, the provider's
//! default) and is never taken from a request.

use lrg_providers::catalog::Access;
use lrg_providers::{ModelInfo, ModelRef};

use super::AppState;
use super::error::ApiError;
use super::menu;
use super::opener::OpenError;

/// What a model id makes the server touch, beside a model behind an API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// A model behind an API whose address the operator set.
    Api,
    /// A program of lrg's choosing (an agent CLI), with the id's model name
    /// as an argument.
    Program,
    /// A command line the id spells out (`acp:`), or a path the id names (a
    /// script, a recording, a model file or folder): whatever fails in
    /// loading it may quote that file or tell whether it exists.
    CommandOrPath,
}

/// The longest model id a request may name (provider, model name and, with
/// `--allow-model-specs`, a path or command line).
const MAX_MODEL_ID_BYTES: usize = 4096;

/// The prefix of an ACP agent's command line, lrg's own (not in the
/// provider table, which knows only models).
const ACP_PREFIX: &str = "acp:";

/// What model id `id` reaches on the server, read from the provider table
/// ([`lrg_providers::Provider::spec`]'s `access`) and the `acp:` prefix.
///
/// An id whose provider is unknown is [`Reach::Api`] here: lrg's resolvers
/// refuse it, and an app whose resolver takes other ids decides for them.
pub(crate) fn reach(id: &str) -> Reach {
    let id = id.trim();
    if id
        .get(..ACP_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(ACP_PREFIX))
    {
        return Reach::CommandOrPath;
    }
    let Ok(model) = id.parse::<ModelRef>() else {
        return Reach::Api;
    };
    match model.provider.spec().access {
        Access::File | Access::Engine(_) => Reach::CommandOrPath,
        Access::Cli(_) => Reach::Program,
        _ => Reach::Api,
    }
}

/// The one answer a remote caller gets when a model that names a command
/// or a path could not be loaded: the same whether the file is missing,
/// unreadable or malformed, and never quoting it. The detail is logged.
pub(crate) fn not_loaded(model: &str, detail: &dyn std::fmt::Display) -> ApiError {
    tracing::warn!("a chat on {model} could not be opened: {detail}");
    // Without the id either, so that the answers for two files differ in
    // nothing a caller could compare.
    ApiError::bad_request(
        "model",
        "cannot start a chat on this model: it could not be loaded (the server's log says why)",
    )
}

/// An opener's error as a remote caller may see it (see [`not_loaded`]).
pub(crate) fn open_error_for(model: &str, e: OpenError) -> ApiError {
    let about_the_model = match &e {
        OpenError::BadRequest { field, .. } => field == "model",
        _ => true,
    };
    if about_the_model && reach(model) == Reach::CommandOrPath {
        not_loaded(model, &e)
    } else {
        super::open::open_error(e)
    }
}

impl AppState {
    /// Whether the menu offers `id` as an available model, by its exact id.
    async fn offered(&self, id: &str) -> bool {
        self.menu
            .menu()
            .await
            .iter()
            .flat_map(|g| &g.models)
            .any(|e| e.available && e.id == id)
    }

    /// Refuse a model the agent token may not open (see the [module
    /// docs](self)); `None` takes the server's default.
    pub(crate) async fn check_open_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        let Some(id) = model.map(str::trim) else {
            return Ok(());
        };
        if id.len() > MAX_MODEL_ID_BYTES {
            // Not resolved, and not echoed: errors that quote an id would
            // answer a megabyte with two.
            return Err(ApiError::bad_request(
                "model",
                format!(
                    "is {} bytes; a model id has at most {MAX_MODEL_ID_BYTES}",
                    id.len()
                ),
            ));
        }
        let default = self.config.defaults.model.as_deref().map(str::trim);
        if reach(id) == Reach::Api
            || self.config.allow_model_specs
            || default == Some(id)
            || self.offered(id).await
        {
            return Ok(());
        }
        Err(ApiError::bad_request(
            "model",
            "names a program or a file on the server, which a request may not: choose one \
             of the models the server offers, by its id (a chat's GET …/models lists them); \
             the operator may allow such models with --allow-model-specs",
        ))
    }

    /// Refuse a model a chat may not switch to: anything but an available
    /// model of its menu, by its exact id. Nothing is resolved, spawned or
    /// opened before this says yes.
    pub(crate) async fn check_switch_model(
        &self,
        current: &ModelInfo,
        id: &str,
    ) -> Result<(), ApiError> {
        let offered = menu::with_current(self.menu.menu().await, current)
            .iter()
            .flat_map(|g| &g.models)
            .any(|e| e.available && e.id == id);
        if offered {
            Ok(())
        } else {
            Err(ApiError::bad_request(
                "model",
                "not one of this chat's models: choose an available one, by its id, \
                 from this chat's GET …/models",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reach_is_read_from_the_provider_table() {
        for id in [
            "acp:sh -c 'id > pwned.txt'",
            " ACP:sh",
            "script:/etc/secret.json",
            "replay:rec.json",
            "llama:/models/x.gguf",
            "mlx:/dir",
        ] {
            assert_eq!(reach(id), Reach::CommandOrPath, "{id}");
        }
        assert_eq!(reach("claude-cli:sonnet"), Reach::Program);
        for id in ["openai:gpt-4.1", "ollama:qwen3:8b", "nope:x", "gpt-4"] {
            assert_eq!(reach(id), Reach::Api, "{id}");
        }
    }

    #[test]
    fn load_failures_look_alike() {
        let missing = open_error_for(
            "script:/a",
            OpenError::field("model", "/a: No such file or directory"),
        );
        let bad = open_error_for(
            "script:/a",
            OpenError::field("model", "/a: invalid script: \"secret\" at line 1"),
        );
        assert_eq!(missing, bad);
        assert!(!bad.to_string().contains("secret"));
        // A model behind an API keeps its reason (no key, ...).
        let api = open_error_for(
            "openai:gpt-4.1",
            OpenError::field("model", "no key: set OPENAI_API_KEY"),
        );
        assert!(api.to_string().contains("OPENAI_API_KEY"));
    }
}
