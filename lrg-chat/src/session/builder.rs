//! [`ChatSessionBuilder`]: what a session is made of, set before it starts.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use lrg_providers::{GenerationSettings, ModelInfo, RetryPolicy, ToolSpec};

use super::{ChatSession, NoTools, SessionConfig, Shared, State, SystemPromptFn, persist};
use crate::context::ContextPolicy;
use crate::events::EventLog;
use crate::model_source::ModelSource;
use crate::permissions::{LongestIdArray, Permissions, TargetCounter};
use crate::store::{SessionId, SessionStore, StoredSession};
use crate::tools::Tools;

/// Builds a [`ChatSession`].
pub struct ChatSessionBuilder {
    models: Arc<dyn ModelSource>,
    tools: Arc<dyn Tools>,
    permissions: Option<Arc<Permissions>>,
    pub(super) system_prompt: Arc<SystemPromptFn>,
    /// The sections behind `system_prompt`, when set by [`Self::prompt`].
    pub(super) prompt: Option<Arc<crate::prompt::PromptBuilder>>,
    target_counter: Arc<dyn TargetCounter>,
    config: SessionConfig,
    local_only: bool,
    store: Option<(Arc<dyn SessionStore>, SessionId)>,
    resumed: Option<StoredSession>,
    /// Makes the delegation layer (sub-agents: see
    /// [`crate::sub_agents`]), which wraps the tools.
    pub(crate) delegation: Option<super::MakeDelegation>,
    pub(super) hooks: Vec<Arc<dyn crate::hooks::SessionHooks>>,
    pub(super) approver: Option<Arc<dyn super::Approver>>,
}

impl ChatSessionBuilder {
    /// See [`ChatSession::builder`].
    pub(super) fn new(models: Arc<dyn ModelSource>) -> Self {
        Self {
            models,
            tools: Arc::new(NoTools),
            permissions: None,
            system_prompt: Arc::new(|_: &ModelInfo, _: &[ToolSpec]| None),
            prompt: None,
            target_counter: Arc::new(LongestIdArray),
            config: SessionConfig::default(),
            local_only: false,
            store: None,
            resumed: None,
            delegation: None,
            hooks: Vec::new(),
            approver: None,
        }
    }

    /// The session's generation settings (default: none, each model's own
    /// defaults): every model turn uses them, under what a message sets
    /// ([`ChatSession::send_with`]). Checked at each turn: an out-of-range
    /// value fails the message with a `config` error naming it.
    pub fn generation(mut self, settings: GenerationSettings) -> Self {
        self.config.generation = settings;
        self
    }

    /// Refuse models that send the conversation to a cloud (default off):
    /// such a turn ends with an `error` event of kind `local_only`.
    pub fn local_only(mut self, on: bool) -> Self {
        self.local_only = on;
        self
    }

    /// Keep the conversation in `store` as session `id`, which the caller has
    /// created or resumed there ([`SessionStore::create`],
    /// [`SessionStore::resume`]): the new rows are appended after each step.
    pub fn store(mut self, store: Arc<dyn SessionStore>, id: SessionId) -> Self {
        self.store = Some((store, id));
        self
    }

    /// Start from a stored session (what [`SessionStore::resume`] returned):
    /// its history, grants and usage, with the history told to viewers as
    /// numbered events first.
    pub fn resumed(mut self, stored: StoredSession) -> Self {
        self.resumed = Some(stored);
        self
    }

    /// The tools offered to the model (default: none).
    pub fn tools(mut self, tools: Arc<dyn Tools>) -> Self {
        self.tools = tools;
        self
    }

    /// The permission settings, usually shared by every session of an app
    /// (default: in-memory defaults for this session alone).
    pub fn permissions(mut self, permissions: Arc<Permissions>) -> Self {
        self.permissions = Some(permissions);
        self
    }

    /// A fixed system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        let prompt = prompt.into();
        self.system_prompt = Arc::new(move |_: &ModelInfo, _: &[ToolSpec]| Some(prompt.clone()));
        self.prompt = None;
        self
    }

    /// A system prompt assembled from named sections at every model turn
    /// (see [`crate::prompt`]): project instructions, skills, memory, ...
    /// Its tools (`load_skill`, `remember`, `forget`) are offered only when
    /// added to the session's tools ([`crate::prompt::PromptBuilder::add_tools`]).
    /// The session keeps it for [`ChatSession::next_prompt`].
    pub fn prompt(mut self, builder: impl Into<Arc<crate::prompt::PromptBuilder>>) -> Self {
        let builder = builder.into();
        let built = builder.clone();
        self.system_prompt = Arc::new(move |info: &ModelInfo, tools: &[ToolSpec]| {
            built.build(info, tools).text_opt()
        });
        self.prompt = Some(builder);
        self
    }

    /// A system prompt built at every model turn.
    pub fn system_prompt_fn(
        mut self,
        prompt: impl Fn(&ModelInfo, &[ToolSpec]) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.system_prompt = Arc::new(prompt);
        self.prompt = None;
        self
    }

    /// Add a hook (see [`crate::hooks`]): hooks run in the order added, and
    /// a sub-agent runs its parent's.
    pub fn hook(mut self, hook: Arc<dyn crate::hooks::SessionHooks>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Add several hooks, in order (e.g. from
    /// [`HooksConfig::into_hooks`](crate::hooks::HooksConfig::into_hooks)).
    pub fn hooks(
        mut self,
        hooks: impl IntoIterator<Item = Arc<dyn crate::hooks::SessionHooks>>,
    ) -> Self {
        self.hooks.extend(hooks);
        self
    }

    /// Answer approval questions with `approver` (default: none, so only
    /// [`ChatSession::answer_approval`] answers them, as a front end reading
    /// `approval_needed` events does). Both may answer; the first answer
    /// counts. A stop, the [`approval_timeout`](Self::approval_timeout) and
    /// a failing approver each deny the call, recorded as such (see
    /// [`Approver`](super::Approver)). Sub-agents ask it too.
    pub fn approver(mut self, approver: Arc<dyn super::Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// How long an approval question waits for an answer before the call
    /// is denied (default: until answered or stopped; see
    /// [`SessionConfig::approval_timeout`]).
    pub fn approval_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.config.approval_timeout = Some(timeout);
        self
    }

    /// How the targets of a call are counted for the bulk limit (default
    /// [`LongestIdArray`]).
    pub fn target_counter(mut self, counter: Arc<dyn TargetCounter>) -> Self {
        self.target_counter = counter;
        self
    }

    /// Model turns allowed per user message (default [`super::MAX_STEPS`]).
    pub fn max_steps(mut self, max_steps: usize) -> Self {
        self.config.max_steps = max_steps;
        self
    }

    /// Repairs a typed answer gets (default [`super::DEFAULT_TYPED_REPAIRS`];
    /// see [`SessionConfig::typed_repairs`]).
    pub fn typed_repairs(mut self, repairs: usize) -> Self {
        self.config.typed_repairs = repairs;
        self
    }

    /// How transient model errors are retried.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.config.retry = retry;
        self
    }

    /// How the conversation is fitted into the window.
    pub fn context(mut self, context: ContextPolicy) -> Self {
        self.config.context = context;
        self
    }

    /// Every tunable at once.
    pub fn config(mut self, config: SessionConfig) -> Self {
        self.config = config;
        self
    }

    /// The session.
    pub fn build(self) -> ChatSession {
        let saved = self.resumed.as_ref().map_or(0, |r| r.rows.len());
        let generation_settings = self.config.generation.clone();
        let parent_id = self
            .store
            .as_ref()
            .map_or_else(SessionId::random, |(_, id)| id.clone());
        let delegation = self.delegation;
        let events = EventLog::with_limits(
            self.config.max_kept_events,
            self.config.max_kept_event_bytes,
        );
        let session = ChatSession {
            shared: Arc::new_cyclic(|weak| {
                let (tools, delegation) = match delegation {
                    Some(make) => {
                        let (tools, layer) = make(weak.clone(), parent_id, self.tools.clone());
                        (tools, Some(layer))
                    }
                    None => (self.tools.clone(), None),
                };
                Shared {
                    delegation,
                    config: self.config,
                    hooks: crate::hooks::Hooks::new(self.hooks),
                    approver: self.approver,
                    questions: super::questions::Desk::new(weak.clone()),
                    models: self.models,
                    tools,
                    base_tools: self.tools,
                    permissions: self.permissions.unwrap_or_default(),
                    system_prompt: self.system_prompt,
                    prompt: self.prompt,
                    target_counter: self.target_counter,
                    events,
                    state: Mutex::new(State {
                        generation_settings,
                        ..State::default()
                    }),
                    local_only: AtomicBool::new(self.local_only),
                    persister: self
                        .store
                        .map(|(store, id)| persist::Persister::new(store, id, saved)),
                }
            }),
        };
        if let Some(stored) = self.resumed {
            persist::replay(&session.shared, stored);
        }
        super::resource_updates::forward(&session.shared);
        session
    }
}
