//! Tool servers that ask the model (MCP `sampling/createMessage`).
//!
//! A server may ask during one of the chat's tool calls. The request is a
//! permission of its own class, "the server asks the model"
//! ([`crate::permissions::decide_sampling`]): it asks under `ask_all` and
//! `auto_read`, through the same approval path as a tool call (an
//! `approval_needed` whose `call_id` is the request's `sampling_id`, tool
//! `sampling/SERVER`, so an [`crate::Approver`], the CLI, HTTP and the page
//! all answer it; "always" writes a rule for `sampling/SERVER`).
//!
//! Once allowed, the chat's current model answers (or
//! [`SessionConfig::sampling_model`](super::SessionConfig::sampling_model)),
//! honouring the request's `systemPrompt`, `maxTokens`, `temperature`,
//! `stopSequences`, images, `tools` and `toolChoice` (`none` offers no
//! tools; `required` offers them and tells the model to call one, as no
//! adapter can force a call). The answer sees the server's messages and
//! nothing of the chat: an `includeContext` of `thisServer` or
//! `allServers` adds the chat's recent text only where
//! [`SessionConfig::sampling_shares_history`](super::SessionConfig::sampling_shares_history)
//! allows it. Its usage counts in the chat's totals.
//!
//! Limits: a chat that is local only never samples a cloud model; a
//! request over 1 MiB of text and images is declined with its size; a
//! sampled answer cannot ask the model again (a call the answering model
//! makes may not sample). Every `sampling_request` event ends with one
//! `sampling_done`, and the server always gets an answer or an error
//! that says why.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use lrg_providers::{ChatModel, GenerationSettings, ModelLocation, Part, Role, TurnRequest};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::approver::{ApprovalRequest, Waited};
use super::run::{TurnFailure, stream_turn};
use crate::events::Event;
use crate::permissions::{Answer, Decision, Rule, decide_sampling, sampling_rule_name};
use crate::tools::ToolClass;
use crate::tools::mcp_sampling::{Refused, Sampled, SamplingAsk, ToolUse};

/// The characters of each message (and the system prompt) shown in a
/// `sampling_request` and its approval.
const SHOWN_CHARS: usize = 2_000;

/// The most of the chat's recent text a request gets when sharing is
/// allowed, in bytes.
const SHARED_HISTORY_BYTES: usize = 16 * 1024;

/// The model that answers tool servers' sampling requests
/// ([`SessionConfig::sampling_model`](super::SessionConfig::sampling_model)).
/// Two are equal when they are the same model object.
#[derive(Clone)]
pub struct SamplingModel(pub Arc<dyn ChatModel>);

impl SamplingModel {
    /// Answer sampling requests with `model`.
    pub fn new(model: impl ChatModel + 'static) -> Self {
        Self(Arc::new(model))
    }
}

impl std::fmt::Debug for SamplingModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SamplingModel")
            .field(&self.0.info().id())
            .finish()
    }
}

impl PartialEq for SamplingModel {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// One message of a sampling request, as a `sampling_request` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SampledMessage {
    /// `user`, `assistant`, or `tool` (tool results the server sends back).
    pub role: String,
    /// Its text, clipped to 2,000 characters.
    pub text: String,
    /// How many images it carries.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub images: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How a sampling request ended (`sampling_done`'s `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SamplingOutcome {
    /// The model answered; the server has its answer.
    Answered,
    /// The person said no (or nobody answered in time).
    Denied,
    /// lrg said no: a rule blocks it, or the chat is local only and the
    /// model is in a cloud.
    Declined,
    /// The model failed.
    Failed,
    /// The person stopped the chat's work.
    Stopped,
}

impl SamplingOutcome {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::Denied => "denied",
            Self::Declined => "declined",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }
}

/// Answer `ask` for the session `me` (see the [module docs](self)).
pub(super) fn sample(
    me: Weak<Shared>,
    ask: SamplingAsk,
    cancel: CancellationToken,
) -> BoxFuture<'static, Result<Sampled, Refused>> {
    Box::pin(async move {
        let Some(shared) = me.upgrade() else {
            return Err(Refused::Failed("the chat has ended".to_owned()));
        };
        let model =
            match &shared.config.sampling_model {
                Some(model) => model.0.clone(),
                None => shared.models.resolve().await.map_err(|e| {
                    Refused::Failed(format!("the chat's model is not available: {e}"))
                })?,
            };
        let n = shared.questions.samplings.fetch_add(1, Ordering::SeqCst) + 1;
        let request = Request {
            shared: &shared,
            id: format!("sampling-{n}"),
            model: model.as_ref(),
            ask,
            cancel: &cancel,
        };
        request.run().await
    })
}

/// One request being answered.
struct Request<'a> {
    shared: &'a Shared,
    id: String,
    model: &'a dyn ChatModel,
    ask: SamplingAsk,
    cancel: &'a CancellationToken,
}

impl Request<'_> {
    async fn run(self) -> Result<Sampled, Refused> {
        let info = self.model.info();
        let shares =
            self.shared.config.sampling_shares_history && self.ask.include_context != "none";
        let shown = shown_messages(&self.ask.messages);
        let system_shown = self
            .ask
            .system_prompt
            .as_deref()
            .map(|s| crate::testing::clip(s, SHOWN_CHARS));
        self.shared.publish(Event::SamplingRequest {
            sampling_id: self.id.clone(),
            server: self.ask.server.clone(),
            tool_call_id: self.ask.tool_call_id.clone(),
            model: info.id(),
            messages: shown.clone(),
            system_prompt: system_shown.clone(),
            max_tokens: self.ask.max_tokens,
            // As the server wrote it, not as an f32 widens (0.699999988).
            temperature: self
                .ask
                .temperature
                .map(|t| (f64::from(t) * 1000.0).round() / 1000.0),
            tools: self.ask.tools.iter().map(|t| t.name.clone()).collect(),
            include_context: self.ask.include_context.to_owned(),
            shares_history: shares,
        });

        if self.shared.local_only.load(Ordering::SeqCst) && info.location == ModelLocation::Cloud {
            let host = info.sends_to.as_deref().unwrap_or(&info.provider);
            return Err(self.refuse(
                SamplingOutcome::Declined,
                format!(
                    "this chat is local only, and {} would send the server's messages to {host}",
                    info.id()
                ),
            ));
        }
        self.allowed(&info, shown, system_shown).await?;
        if self.cancel.is_cancelled() {
            return Err(self.stopped());
        }

        let history = shares.then(|| recent_text(self.shared));
        let request = self.turn_request(history);
        let answered = crate::tools::mcp_link::while_sampling(stream_turn(
            self.shared,
            self.model,
            &request,
            self.cancel,
            false,
        ))
        .await;
        let turn = match answered {
            Ok(turn) => turn,
            Err(TurnFailure::Stopped) => return Err(self.stopped()),
            Err(TurnFailure::Failed(e) | TurnFailure::LocalOnly(e)) => {
                return Err(self.refuse(
                    SamplingOutcome::Failed,
                    format!("the model could not answer: {e}"),
                ));
            }
        };
        let (usage, cost) = match turn.usage {
            Some(usage) => {
                let cost = super::budget::cost(self.shared, &info, &usage);
                super::budget::record(&mut self.shared.lock(), usage, cost);
                (Some(usage), Some(cost))
            }
            None => (None, None),
        };
        let parts: Vec<Part> = turn
            .parts
            .into_iter()
            .filter(|p| matches!(p, Part::Text { .. } | Part::ToolCall(_)))
            .collect();
        let text: String = parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let tool_calls = parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall(c) => Some(c.name.clone()),
                _ => None,
            })
            .collect();
        self.shared.publish(Event::SamplingDone {
            sampling_id: self.id.clone(),
            outcome: SamplingOutcome::Answered,
            text: Some(text),
            tool_calls,
            usage,
            cost,
            reason: None,
        });
        Ok(Sampled {
            model: info.id(),
            parts,
            stop: turn.stop,
        })
    }

    /// Whether the permissions (or the person) let the model answer; the
    /// refusal, published, when not.
    async fn allowed(
        &self,
        info: &lrg_providers::ModelInfo,
        shown: Vec<SampledMessage>,
        system_shown: Option<String>,
    ) -> Result<(), Refused> {
        let server = &self.ask.server;
        let rule_name = sampling_rule_name(server);
        let chat_allowed = self.shared.lock().chat_allowed.contains(&rule_name);
        let settings = self.shared.permissions.settings();
        let reason = match decide_sampling(&settings, server, chat_allowed) {
            Decision::Allow => return Ok(()),
            Decision::Block => {
                return Err(self.refuse(
                    SamplingOutcome::Declined,
                    format!("a rule blocks `{rule_name}`: the model does not answer `{server}`"),
                ));
            }
            Decision::Ask(reason) => reason,
        };
        let arguments = json!({
            "server": server,
            "model": info.id(),
            "messages": shown,
            "system_prompt": system_shown,
            "max_tokens": self.ask.max_tokens,
        });
        let mut question = ApprovalRequest::new(
            self.id.clone(),
            rule_name.clone(),
            // It changes nothing, but spends tokens and sends the server's
            // text to the model: weighed as a change.
            ToolClass::Change,
            arguments,
            reason,
        );
        question.title = Some(format!("{server} asks the model"));
        let destination = match &info.sends_to {
            Some(host) => format!(" (sent to {host})"),
            None => " (on this machine)".to_owned(),
        };
        question.warnings = vec![format!(
            "the tool server `{server}` asks {}{destination} to answer its {} message(s), in up to {} tokens",
            info.id(),
            self.ask.messages.len(),
            self.ask.max_tokens
        )];
        match super::approver::wait(self.shared, &question, self.cancel).await {
            Waited::Answered(Answer::Once) => Ok(()),
            Waited::Answered(Answer::ThisChat) => {
                self.shared.lock().chat_allowed.insert(rule_name);
                Ok(())
            }
            Waited::Answered(Answer::Always) => {
                let status = self
                    .shared
                    .permissions
                    .set_rule(&rule_name, Some(Rule::Allow));
                self.shared.permissions_event(status);
                Ok(())
            }
            Waited::Answered(Answer::Deny { note }) => {
                let mut why = "the person did not let the model answer".to_owned();
                if let Some(note) = note {
                    why.push_str(": ");
                    why.push_str(&note);
                }
                Err(self.refuse(SamplingOutcome::Denied, why))
            }
            Waited::Stopped => Err(self.stopped()),
            Waited::TimedOut(after) => Err(self.refuse(
                SamplingOutcome::Denied,
                format!(
                    "nobody answered within {} s whether the model may answer",
                    after.as_secs_f64()
                ),
            )),
        }
    }

    /// What the model is sent: the server's messages, settings and tools.
    fn turn_request(&self, history: Option<String>) -> TurnRequest {
        let ask = &self.ask;
        let mut system = ask.system_prompt.clone().unwrap_or_default();
        let tools = match ask.tool_use {
            ToolUse::None => Vec::new(),
            ToolUse::Auto | ToolUse::Required => ask.tools.clone(),
        };
        if ask.tool_use == ToolUse::Required && !tools.is_empty() {
            push_paragraph(&mut system, "Answer by calling one of the tools offered.");
        }
        if let Some(history) = history.filter(|h| !h.is_empty()) {
            push_paragraph(
                &mut system,
                &format!(
                    "Context: the recent conversation of the chat this request comes from.\n{history}"
                ),
            );
        }
        let mut settings = GenerationSettings::new().max_tokens(ask.max_tokens);
        if let Some(t) = ask.temperature {
            settings = settings.temperature(t);
        }
        if !ask.stop_sequences.is_empty() {
            settings = settings.stop(ask.stop_sequences.iter().cloned());
        }
        TurnRequest::new(ask.messages.clone())
            .system_opt((!system.is_empty()).then_some(system))
            .tools(tools)
            .settings(settings)
    }

    /// Publish how it ended without an answer; what the server is told.
    fn refuse(&self, outcome: SamplingOutcome, reason: String) -> Refused {
        self.shared.publish(Event::SamplingDone {
            sampling_id: self.id.clone(),
            outcome,
            text: None,
            tool_calls: Vec::new(),
            usage: None,
            cost: None,
            reason: Some(reason.clone()),
        });
        match outcome {
            SamplingOutcome::Failed | SamplingOutcome::Stopped => Refused::Failed(reason),
            _ => Refused::Declined(reason),
        }
    }

    fn stopped(&self) -> Refused {
        self.refuse(
            SamplingOutcome::Stopped,
            "the person stopped the chat's work".to_owned(),
        )
    }
}

fn push_paragraph(text: &mut String, paragraph: &str) {
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(paragraph);
}

/// The request's messages as shown.
fn shown_messages(messages: &[lrg_providers::Message]) -> Vec<SampledMessage> {
    messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            };
            let mut text = m.text();
            if role == "tool" {
                text = m
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolResult(r) => Some(r.text_content()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            SampledMessage {
                role: role.to_owned(),
                text: crate::testing::clip(&text, SHOWN_CHARS),
                images: m
                    .parts
                    .iter()
                    .filter(|p| matches!(p, Part::Image(_)))
                    .count(),
            }
        })
        .collect()
}

/// The chat's recent text, newest last, at most [`SHARED_HISTORY_BYTES`].
fn recent_text(shared: &Shared) -> String {
    let state = shared.lock();
    let mut lines: Vec<String> = Vec::new();
    let mut bytes = 0;
    for message in state.history.iter().rev() {
        let who = match message.role {
            Role::User => "User",
            Role::Assistant => "Assistant",
            Role::Tool => continue,
        };
        let text = message.text();
        if text.trim().is_empty() {
            continue;
        }
        let line = format!("{who}: {text}");
        if bytes + line.len() > SHARED_HISTORY_BYTES {
            break;
        }
        bytes += line.len();
        lines.push(line);
    }
    lines.reverse();
    lines.join("\n")
}
