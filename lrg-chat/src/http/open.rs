//! Opening, switching, putting away and ending chats: the HTTP side of the
//! session registry. The registry decides what an open finds (a live chat, a
//! stored one, nothing) and what keys on another model do (refuse, carry
//! over, archive and replace); this module keeps its table of live chats
//! (tokens, tool hosts) in step with it. Only `DELETE` ends a chat for good.

use std::sync::Arc;

use lrg_providers::ModelInfo;

use super::error::ApiError;
use super::opener::{ChatSpec, OpenError, OpenedChat};
use super::sessions::LiveChat;
use super::{AppState, ChatLink, OpenedAs, model_rule};
use crate::events::Event;
use crate::registry::{OpenRequest, Opened, OpenedHow, OtherModel, RegistryError};
use crate::session::{ChatSessionBuilder, SwitchableModel};
use crate::store::{ModelBinding, SessionId, SessionKeys, StoreError};
use crate::tools::ToolHost;

/// Who asks for a chat: the app itself, whose own errors keep their detail
/// (a local operator may see their own files), or a request over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// [`super::ChatServer::open_chat`].
    App,
    /// A request with the agent token.
    Remote,
}

/// What an opener prepared besides the session builder.
struct Prepared {
    model: ModelInfo,
    host: Option<Arc<ToolHost>>,
    warnings: Vec<String>,
    source: Option<Arc<SwitchableModel>>,
}

fn split(chat: OpenedChat) -> (ChatSessionBuilder, Prepared) {
    let OpenedChat {
        builder,
        model,
        host,
        warnings,
        source,
    } = chat;
    (
        builder,
        Prepared {
            model,
            host,
            warnings,
            source,
        },
    )
}

pub(crate) fn open_error(e: OpenError) -> ApiError {
    match e {
        OpenError::BadRequest { field, message } => ApiError::bad_request(&field, message),
        OpenError::Failed(message) => ApiError::internal(message),
    }
}

fn registry_error(e: RegistryError, caller: Caller) -> ApiError {
    match e {
        RegistryError::Model { model, reason }
            if caller == Caller::Remote
                && model_rule::reach(&model) == model_rule::Reach::CommandOrPath =>
        {
            model_rule::not_loaded(&model, &reason)
        }
        RegistryError::Keys(e) => ApiError::bad_body(e.to_string()),
        RegistryError::Full(n) => ApiError::too_many(format!(
            "{n} chats are open, the most this server allows, and none can be put away \
             (unkeyed or busy): end one first"
        )),
        RegistryError::Busy(_) => ApiError::busy(),
        RegistryError::OtherModel {
            stored_model,
            asked_model,
            ..
        } => {
            let message = format!(
                "the chat under these keys is on {stored_model}, not {asked_model}; nothing \
                 was changed. Open it on {stored_model} (or name no model), send \
                 \"carry_over\": true to carry the conversation over to {asked_model}, or \
                 \"replace\": true to start a new chat in its place (the old one is archived, \
                 not deleted)"
            );
            ApiError::other_model(stored_model, message)
        }
        RegistryError::Model { model, reason } => {
            ApiError::bad_request("model", format!("cannot start a chat on {model}: {reason}"))
        }
        RegistryError::Store(StoreError::Locked { .. }) => ApiError::conflict(
            "the stored chat these keys name is open in another process: close it there first",
        ),
        // Damage needs a person: said plainly, the file and line only in
        // the log (store messages name files).
        RegistryError::Store(e) if e.is_damage() => {
            tracing::error!("the stored chat of an open request is damaged: {e}");
            ApiError::internal(
                "the stored chat these keys name is damaged (or written by a newer lrg) and \
                 was left as it is; it cannot be resumed until the server's operator repairs \
                 or removes it (the server log names the file)",
            )
        }
        // Store messages name files: the detail goes to the log only.
        other => {
            tracing::warn!("opening a chat failed: {other}");
            ApiError::internal("the chat could not be opened: its store failed")
        }
    }
}

fn opened_as(how: &OpenedHow) -> OpenedAs {
    match how {
        OpenedHow::Live => OpenedAs::Live,
        OpenedHow::Resumed { .. } => OpenedAs::Resumed,
        OpenedHow::CarriedOver { .. } => OpenedAs::CarriedOver,
        OpenedHow::Replaced { .. } => OpenedAs::Replaced,
        _ => OpenedAs::Created,
    }
}

/// What the registry is asked for. Every chat is kept in the store, keyed
/// or not: its owner's list finds it again after a restart.
fn request(spec: &ChatSpec, keys: Option<&SessionKeys>, other: OtherModel) -> OpenRequest {
    let binding = ModelBinding::new(spec.model_id().unwrap_or_default());
    let request = match keys {
        Some(keys) => OpenRequest::keyed(keys.clone(), binding).on_other_model(other),
        None => OpenRequest::new(binding),
    };
    request.owner(spec.owner_or_default())
}

impl AppState {
    /// The model of the chat `keys` name, live or stored: what an open
    /// that names no model resumes it on.
    pub(crate) async fn kept_model(&self, keys: &SessionKeys) -> Result<Option<String>, ApiError> {
        self.registry
            .kept_model(keys)
            .await
            .map(|m| m.map(|m| m.model))
            .map_err(|e| registry_error(e, Caller::Remote))
    }

    /// Open a chat with `spec` (defaults applied): create-or-resume with
    /// `keys`, create without; `other` says what keys naming a chat on
    /// another model do.
    pub(crate) async fn open_chat(
        &self,
        spec: ChatSpec,
        keys: Option<SessionKeys>,
        other: OtherModel,
        caller: Caller,
    ) -> Result<ChatLink, ApiError> {
        let spec = spec.or(&self.config.defaults);
        let model = spec.model_id().map_err(open_error)?.to_string();
        // The opener's own error (a 400 naming its field) is kept aside:
        // the registry only carries its text.
        let mut refused = None;
        let (slot, opener, wanted) = (&mut refused, &self.opener, &spec);
        let build = move |binding: &ModelBinding| {
            let model = binding.model.clone();
            async move {
                match opener.open(wanted.clone()).await {
                    Ok(chat) => Ok(split(chat)),
                    Err(e) => {
                        let reason = e.to_string();
                        *slot = Some(e);
                        Err(RegistryError::Model { model, reason })
                    }
                }
            }
        };
        let result = self
            .registry
            .open_with(request(&spec, keys.as_ref(), other), build)
            .await;
        match result {
            Ok((opened, prepared)) => self.admit(opened, prepared, spec, keys),
            Err(e) => Err(match (refused, caller) {
                (None, _) => registry_error(e, caller),
                (Some(refused), Caller::App) => open_error(refused),
                (Some(refused), Caller::Remote) => model_rule::open_error_for(&model, refused),
            }),
        }
    }

    /// Open a new chat on `model` beside `old`, with its connections,
    /// settings and keys but not its conversation. `old` is not ended: it
    /// stays live and kept, archived when keyed (its keys go to the new
    /// chat), so nothing of it is lost.
    pub(crate) async fn switch(&self, old: &LiveChat, model: String) -> Result<ChatLink, ApiError> {
        // Permissions bound to a file are the app's shared ones (the
        // opener gives them again); others are copied as they are now.
        let permissions = old.session.permissions();
        let spec = ChatSpec {
            model: Some(model.clone()),
            permissions: permissions.path().is_none().then(|| permissions.settings()),
            local_only: Some(old.session.local_only()),
            ..old.spec.clone()
        };
        // Prepared first: a model that cannot be had leaves this chat as it is.
        let prepared = self
            .opener
            .open(spec.clone())
            .await
            .map_err(|e| model_rule::open_error_for(&model, e))?;
        if old.keys.is_some()
            && let Err(e) = self.registry.archive(&old.id).await
        {
            prepared.discard().await;
            return Err(registry_error(e, Caller::Remote));
        }
        let keys = old.keys.clone();
        let ready = split(prepared);
        let build = move |_: &ModelBinding| std::future::ready(Ok(ready));
        let (opened, prepared) = self
            .registry
            .open_with(request(&spec, keys.as_ref(), OtherModel::Refuse), build)
            .await
            .map_err(|e| registry_error(e, Caller::Remote))?;
        self.admit(opened, prepared, spec, keys)
    }

    /// Carry `chat`'s conversation over to `model`, in place: the same chat
    /// and token, on the new model (see
    /// [`crate::session::ChatSession::carry_over`]).
    pub(crate) async fn carry_over(&self, chat: &LiveChat, model: String) -> Result<(), ApiError> {
        let Some(source) = &chat.source else {
            return Err(ApiError::conflict(
                "this chat stays on the model it was opened on: switch without \
                 \"carry_over\" for a new chat",
            ));
        };
        let spec = ChatSpec {
            model: Some(model.clone()),
            local_only: Some(chat.session.local_only()),
            ..chat.spec.clone()
        };
        let next = self
            .opener
            .model(spec)
            .await
            .map_err(|e| model_rule::open_error_for(&model, e))?;
        let info = next.info();
        self.registry
            .carry_over(&chat.id, source, next, ModelBinding::new(&model))
            .await
            .map_err(|e| registry_error(e, Caller::Remote))?;
        chat.set_model(info);
        Ok(())
    }

    /// Open chat `id` of `owner` by its id: the live chat (with its
    /// token), or the stored one resumed on the model it is bound to, with
    /// a new chat token. Another owner's chat and an unknown one are the
    /// uniform 403.
    pub(crate) async fn open_owned(
        &self,
        id: &SessionId,
        owner: &str,
    ) -> Result<ChatLink, ApiError> {
        let mut refused = None;
        let mut used = None;
        let (slot, spec_slot, opener, defaults) =
            (&mut refused, &mut used, &self.opener, &self.config.defaults);
        let build = move |binding: &ModelBinding| {
            let model = binding.model.clone();
            let spec = ChatSpec::new()
                .model(model.clone())
                .owner(owner)
                .or(defaults);
            *spec_slot = Some(spec.clone());
            async move {
                match opener.open(spec).await {
                    Ok(chat) => Ok(split(chat)),
                    Err(e) => {
                        let reason = e.to_string();
                        *slot = Some((model.clone(), e));
                        Err(RegistryError::Model { model, reason })
                    }
                }
            }
        };
        let result = self.registry.open_stored(id, owner, build).await;
        let (opened, prepared) = match result {
            Ok(done) => done,
            Err(RegistryError::NotFound(_)) => return Err(ApiError::forbidden()),
            Err(e) => {
                return Err(match refused {
                    Some((model, refused)) => model_rule::open_error_for(&model, refused),
                    None => registry_error(e, Caller::Remote),
                });
            }
        };
        let keys = self
            .registry
            .live_meta(&opened.id)
            .and_then(|m| m.live_keys().cloned());
        let spec = used.unwrap_or_else(|| ChatSpec::new().owner(owner).or(&self.config.defaults));
        self.admit(opened, prepared, spec, keys)
    }

    /// Take what the registry opened into the table of live chats.
    fn admit(
        &self,
        opened: Opened,
        prepared: Option<Prepared>,
        spec: ChatSpec,
        keys: Option<SessionKeys>,
    ) -> Result<ChatLink, ApiError> {
        let how = opened_as(&opened.how);
        let Some(prepared) = prepared else {
            // Live: the same chat, with the same token.
            let chat = self
                .chats
                .get(opened.id.as_str())
                .ok_or_else(|| ApiError::conflict("this chat is ending: open it again"))?;
            return Ok(self.link(&chat, how));
        };
        for message in prepared.warnings {
            opened.session.events().publish(Event::Warning {
                message,
                retrying: false,
            });
        }
        let chat = LiveChat::new(
            opened.id,
            opened.session,
            prepared.model,
            prepared.host,
            prepared.source,
            spec,
            keys,
        );
        // The same id rebuilt (a live chat carried over): the old session
        // and its streams end, its conversation goes on in the new one.
        if let Some(old) = self.chats.insert(chat.clone()) {
            tokio::spawn(async move { old.end().await });
        }
        self.end_gone();
        Ok(self.link(&chat, how))
    }

    /// End, in the background, the chats the registry no longer holds (put
    /// away to make room or when idle): their stored copies stay.
    pub(crate) fn end_gone(&self) {
        for chat in self.chats.take_where(|id| !self.registry.is_live(id)) {
            tokio::spawn(async move { chat.end().await });
        }
    }

    /// End `chat` for good: it stops (a running tool finishes and its result
    /// is recorded), then its stored copy is deleted under the store's lock,
    /// so no late write brings it back.
    pub(crate) async fn end_chat(&self, chat: &LiveChat) -> Result<(), ApiError> {
        if let Some(chat) = self.chats.remove(&chat.id) {
            chat.end().await;
        }
        self.registry.end(&chat.id).await.map_err(|e| {
            tracing::warn!("the stored copy of chat {} was not deleted: {e}", chat.id);
            ApiError::internal("the chat ended, but its stored copy could not be deleted")
        })?;
        Ok(())
    }

    /// Put away keyed chats idle too long; a chat a page watches is in use.
    pub(crate) async fn evict_idle(&self) -> usize {
        for chat in self.chats.watched() {
            self.registry.get(&chat.id);
        }
        let n = self.registry.evict_idle().await;
        self.end_gone();
        n
    }

    pub(crate) fn link(&self, chat: &LiveChat, opened: OpenedAs) -> ChatLink {
        ChatLink {
            page_url: format!(
                "{}/v1/ui/chat#session={}&token={}",
                self.config.base_path,
                chat.id,
                chat.token()
            ),
            session: chat.id.to_string(),
            chat_token: chat.token().to_string(),
            opened,
        }
    }
}
