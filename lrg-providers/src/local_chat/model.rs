//! [`LocalChatModel`]: a [`ChatModel`] over any [`LocalEngine`].

use std::sync::Arc;

use futures::StreamExt as _;
use tokio_util::sync::CancellationToken;

use super::answer::{Answer, parse_answer, parse_typed_answer, tail};
use super::answer_schema::{OfferedTool, offer_tools, schema_for};
use super::chat::{Chat, Held, next_loading};
use super::decoder::AnswerDecoder;
use super::engine::{EngineEvent, EngineStop, EngineTurn, LocalEngine};
use super::pool::ChatSlot;
use super::prompt::render;
use crate::typed::OutputMode;
use crate::{
    ChatModel, Message, ModelInfo, ModelLocation, ProviderError, StopReason, ToolCall, TurnEvent,
    TurnRequest, TurnStream,
};

/// Answer budget when the request sets none: room for a full analysis and
/// reply (6,600 characters at about 3 per token) with margin.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Images kept attached by default; older ones become `[image omitted]`
/// (each image costs hundreds of tokens of a small context).
pub const DEFAULT_MAX_IMAGES: usize = 2;

/// How much of a malformed answer an error quotes.
const ERROR_TAIL_CHARS: usize = 200;

/// A [`ChatModel`] for a local engine, with tool calling by constrained
/// decoding (DESIGN.md, "Tool calling without a tool-call format").
///
/// Each turn renders the conversation into plain messages, constrains the
/// answer to `{"analysis", "call": {"<tool>": {…}}}` or `{"analysis", "reply"}`
/// with a JSON Schema the engine enforces, streams `analysis` as reasoning and
/// `reply` as text while they are generated, and turns a `call` into one
/// [`ToolCall`].
///
/// Images: for an engine that sees ([`LocalEngine::vision`]) the newest
/// `max_images` stay attached, each at its place in its message (an
/// [`IMAGE_SLOT`](super::IMAGE_SLOT)), older ones become `[image omitted]`;
/// a blind engine gets a short note per image instead, never an error.
///
/// How a turn ends:
/// - a reply: `End { EndTurn }`; a call: the [`ToolCall`], then `End { ToolCalls }`;
/// - the token budget ran out before the answer was complete: what was streamed
///   stays, no call is made (half-written arguments are never run), `End { MaxTokens }`;
/// - cancelled: `End { Cancelled }`, as soon as the token fires;
/// - the engine said it was done but the answer is not one of the two forms, or
///   calls a tool that was not offered: [`ProviderError::Protocol`] quoting the
///   end of the answer (a grammar-constrained engine cannot produce this, so it
///   is a bug worth seeing, not retrying);
/// - the engine's stream ended without saying it was done (its worker died):
///   [`ProviderError::Transient`].
///
/// Each model is one chat ([`SequenceId`](super::SequenceId)) of its engine:
/// clones share it, and when the last clone is dropped the engine is told
/// ([`LocalEngine::release`]). A turn that starts while another of this chat
/// runs (sub-agents share their parent's model) runs on a spare sequence of
/// the chat, so no two turns share one. A model from the engine pool
/// ([`super::pool`]) holds the pool's entry rather than the engine, so the
/// engine may be unloaded while the chat is idle and is loaded again by its
/// next turn (streaming [`TurnEvent::Loading`] meanwhile).
#[derive(Clone)]
pub struct LocalChatModel {
    provider: String,
    chat: Arc<Chat>,
    default_max_tokens: u32,
    default_temperature: f32,
    seed: Option<u32>,
    max_images: usize,
}

impl std::fmt::Debug for LocalChatModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalChatModel")
            .field("provider", &self.provider)
            .field("model", &self.chat.facts().name)
            .field("sequence", &self.chat.sequence())
            .field("default_max_tokens", &self.default_max_tokens)
            .field("default_temperature", &self.default_temperature)
            .field("seed", &self.seed)
            .field("max_images", &self.max_images)
            .finish()
    }
}

impl LocalChatModel {
    /// A model reported as `provider` (`llama`, `mlx`) running on `engine`.
    pub fn new(provider: impl Into<String>, engine: Arc<dyn LocalEngine>) -> Self {
        Self::with_chat(provider.into(), Chat::direct(engine))
    }

    /// A chat of a pooled engine (see [`super::pool::EnginePool::connect`]).
    pub(crate) fn pooled(provider: &str, slot: ChatSlot) -> Self {
        Self::with_chat(provider.to_string(), Chat::pooled(slot))
    }

    fn with_chat(provider: String, chat: Chat) -> Self {
        Self {
            provider,
            chat: Arc::new(chat),
            default_max_tokens: DEFAULT_MAX_TOKENS,
            default_temperature: 0.0,
            seed: None,
            max_images: DEFAULT_MAX_IMAGES,
        }
    }

    /// Answer budget for requests that set none (default [`DEFAULT_MAX_TOKENS`]).
    pub fn with_default_max_tokens(mut self, max_tokens: u32) -> Self {
        self.default_max_tokens = max_tokens;
        self
    }

    /// Temperature for requests that set none (default 0: greedy).
    pub fn with_default_temperature(mut self, temperature: f32) -> Self {
        self.default_temperature = temperature;
        self
    }

    /// Sampling seed passed to the engine for requests that set none, for
    /// reproducible sampled runs.
    pub fn with_seed(mut self, seed: Option<u32>) -> Self {
        self.seed = seed;
        self
    }

    /// How many of the newest images stay attached (default [`DEFAULT_MAX_IMAGES`]).
    pub fn with_max_images(mut self, max_images: usize) -> Self {
        self.max_images = max_images;
        self
    }

    /// The engine turn this model would run for `request`: the rendered
    /// conversation and the answer schema. Useful to inspect the prompt.
    pub fn engine_turn(&self, request: &TurnRequest) -> EngineTurn {
        self.prepare(request).0
    }

    /// The engine turn for `request` and the tools it offers. A typed
    /// request whose schema no grammar can hold gets the reason instead.
    fn prepare(&self, request: &TurnRequest) -> (EngineTurn, Vec<OfferedTool>, Option<String>) {
        let tools = offer_tools(&request.tools);
        let (typed_reply, unusable) = match request.output.as_ref().map(|o| o.grammar()) {
            Some(Ok(grammar)) => (Some(grammar), None),
            Some(Err(why)) => (
                None,
                Some(format!(
                    "the local model cannot give this typed answer: its schema cannot be made a grammar ({why})"
                )),
            ),
            None => (None, None),
        };
        let settings = &request.settings;
        // A blind engine gets a note in place of each image, never an error.
        let messages = if self.chat.facts().vision {
            std::borrow::Cow::Borrowed(request.messages.as_slice())
        } else {
            crate::images::describe_images(&request.messages)
        };
        let turn = EngineTurn {
            sequence: self.chat.sequence(),
            messages: render(
                request.system.as_deref(),
                &tools,
                request.output.as_ref(),
                &messages,
                self.max_images,
            ),
            schema: schema_for(&tools, typed_reply),
            max_tokens: settings.max_tokens.unwrap_or(self.default_max_tokens),
            temperature: settings.temperature.unwrap_or(self.default_temperature),
            top_p: settings.top_p,
            seed: settings.seed.or(self.seed),
        };
        // The answer is JSON its grammar closes: a stop sequence would cut it
        // mid-object. The engines' samplers have no top-k cut yet.
        crate::generation::dropped(
            "local engine",
            &[
                ("stop", !settings.stop.is_empty()),
                ("top_k", settings.top_k.is_some()),
            ],
        );
        (turn, tools, unusable)
    }
}

impl ChatModel for LocalChatModel {
    fn info(&self) -> ModelInfo {
        let facts = self.chat.facts();
        ModelInfo::new(
            self.provider.clone(),
            facts.name.clone(),
            ModelLocation::Local,
        )
        .context_window(Some(facts.window))
        .vision(facts.vision)
        .output_mode(OutputMode::Grammar)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let (mut turn, tools, unusable) = self.prepare(&request);
        let offered: Vec<String> = tools.into_iter().map(|t| t.spec.name).collect();
        let call_id = next_call_id(&request.messages);
        let chat = Arc::clone(&self.chat);
        let typed = request.output.is_some();
        Box::pin(async_stream::stream! {
            if let Some(message) = unusable {
                yield Err(ProviderError::Config { message });
                return;
            }
            if cancel.is_cancelled() {
                yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                return;
            }
            // Held until the stream is done or dropped: the sequence (no
            // other turn runs on it meanwhile) and the lease (the engine
            // stays loaded).
            let sequence = chat.take();
            turn.sequence = sequence.sequence();
            let lease = match chat.engine() {
                Ok(direct) => direct,
                Err(entry) => {
                    let mut progress = entry.loading_events();
                    let leasing = entry.lease();
                    tokio::pin!(leasing);
                    let mut last = None;
                    let leased = loop {
                        tokio::select! {
                            biased;
                            () = cancel.cancelled() => {
                                yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                                return;
                            }
                            // Reports already sent come before the lease they led to.
                            event = next_loading(&mut progress, &entry.id) => {
                                last = Some(event);
                                yield Ok(TurnEvent::Loading { progress: event });
                            }
                            leased = &mut leasing => break leased,
                        }
                    };
                    if last.is_some_and(|p| p < 1.0) && leased.is_ok() {
                        // A viewer's bar always ends full (a lagging
                        // subscriber may have missed the last report).
                        yield Ok(TurnEvent::Loading { progress: 1.0 });
                    }
                    match leased {
                        Ok(lease) => Held::Pooled(lease),
                        Err(error) => {
                            yield Err(error);
                            return;
                        }
                    }
                }
            };
            let mut events = lease.engine().generate(turn, cancel.clone());
            let mut decoder = AnswerDecoder::new().with_call_id(call_id.clone());
            let mut reuse = None;
            if typed {
                decoder = decoder.typed();
            }
            let (usage, stop) = loop {
                let event = tokio::select! {
                    biased;
                    () = cancel.cancelled() => {
                        yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                        return;
                    }
                    event = events.next() => event,
                };
                match event {
                    Some(Ok(EngineEvent::Delta { text })) => {
                        for delta in decoder.feed(&text) {
                            yield Ok(delta);
                        }
                    }
                    Some(Ok(EngineEvent::Prefill { kv })) => {
                        if kv.dropped {
                            tracing::info!(prefilled = kv.prefilled, "this chat's saved KV state had been dropped; its prompt was prefilled again");
                        }
                        reuse = Some(kv);
                    }
                    Some(Ok(EngineEvent::Done { usage, stop })) => break (usage, stop),
                    Some(Err(error)) => {
                        yield Err(error);
                        return;
                    }
                    None => {
                        yield Err(ProviderError::transient(format!(
                            "the local engine stopped before finishing its answer; it had written: {}",
                            tail(decoder.raw(), ERROR_TAIL_CHARS)
                        )));
                        return;
                    }
                }
            };
            let end = match stop {
                EngineStop::Cancelled => StopReason::Cancelled,
                EngineStop::Done | EngineStop::MaxTokens => match if typed {
                    parse_typed_answer(decoder.raw())
                } else {
                    parse_answer(decoder.raw())
                } {
                    Ok(Answer::Reply { .. } | Answer::Typed { .. }) => StopReason::EndTurn,
                    Ok(Answer::Call { name, arguments, .. }) => {
                        if !offered.contains(&name) {
                            yield Err(ProviderError::Protocol {
                                message: format!(
                                    "the model called `{name}`, which was not offered (offered: {})",
                                    if offered.is_empty() { "none".to_string() } else { offered.join(", ") }
                                ),
                            });
                            return;
                        }
                        yield Ok(TurnEvent::ToolCall(ToolCall { id: call_id, name, arguments }));
                        StopReason::ToolCalls
                    }
                    Err(_) if stop == EngineStop::MaxTokens => {
                        if decoder.raw().contains("\"call\"") {
                            tracing::warn!(completion_tokens = usage.completion_tokens, "answer budget ran out while the local model was writing a tool call; the call is dropped");
                        }
                        StopReason::MaxTokens
                    }
                    Err(problem) => {
                        yield Err(ProviderError::Protocol {
                            message: format!(
                                "{problem}; the answer ended with: {}",
                                tail(decoder.raw(), ERROR_TAIL_CHARS)
                            ),
                        });
                        return;
                    }
                },
            };
            // An engine that reports what it kept but not as usage: the
            // usage says how much of the prompt was not computed again.
            let usage = match reuse {
                Some(kv) if usage.cached_prompt_tokens.is_none() => {
                    usage.with_cached_prompt_tokens(kv.reused())
                }
                _ => usage,
            };
            drop(lease);
            drop(sequence);
            yield Ok(TurnEvent::Usage(usage));
            yield Ok(TurnEvent::End { stop: end });
        })
    }
}

/// `call_<n>` with n one more than the tool calls already in the history, so a
/// replayed conversation gets the same ids; bumped past any id already taken
/// (histories may hold other providers' ids).
pub(crate) fn next_call_id(messages: &[Message]) -> String {
    let existing: Vec<&str> = messages
        .iter()
        .flat_map(Message::tool_calls)
        .map(|c| c.id.as_str())
        .collect();
    let mut n = existing.len() + 1;
    loop {
        let id = format!("call_{n}");
        if !existing.contains(&id.as_str()) {
            return id;
        }
        n += 1;
    }
}
