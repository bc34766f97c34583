//! What a chat has cost, and the limits on it ([`SessionConfig::budget`]).
//!
//! Every model turn's usage is priced by [`SessionConfig::prices`] and
//! added to three totals: the message's, this run's (since the session was
//! built or resumed in this process) and the chat's (its whole life,
//! kept in the store). Before each model turn, [`check`] compares each
//! total plus the next request's estimated input with its limit; one that
//! would be passed ends the message cleanly, as the step limit does: every
//! call made so far has its result, and an `error` event of kind `budget`
//! says which limit it was.
//!
//! A sub-agent's spending counts toward its parent's run and chat totals
//! when it finishes ([`absorb_sub_agent`]); the sub-agent's own turns are
//! checked against its own session's limits.
//!
//! [`SessionConfig::budget`]: super::SessionConfig::budget
//! [`SessionConfig::prices`]: super::SessionConfig::prices

use lrg_providers::pricing::{self, Cost, Spend};
use lrg_providers::{ModelInfo, ModelLocation, TurnRequest, Usage};
use serde::{Deserialize, Serialize};

use super::{ChatSession, Shared, State};

/// Limits on tokens and dollars, for one scope. `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SpendLimit {
    /// The most dollars, as priced by [`super::SessionConfig::prices`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_usd: Option<f64>,
    /// The most tokens, prompt and completion together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

impl SpendLimit {
    /// At most `usd` dollars (`None`: no dollar limit).
    pub fn usd(mut self, usd: impl Into<Option<f64>>) -> Self {
        self.max_usd = usd.into();
        self
    }

    /// At most `tokens` tokens (`None`: no token limit).
    pub fn tokens(mut self, tokens: impl Into<Option<u64>>) -> Self {
        self.max_tokens = tokens.into();
        self
    }

    /// Whether it limits anything.
    pub fn is_set(&self) -> bool {
        self.max_usd.is_some() || self.max_tokens.is_some()
    }
}

/// [`super::SessionConfig::budget`]: limits per message, per run and per
/// chat; any that is set is checked before each model turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CostBudget {
    /// For each user message (its model turns and tool calls).
    #[serde(default)]
    pub per_message: SpendLimit,
    /// For this run: since the session was built (or resumed) in this
    /// process. `lrg run --max-cost` sets this one.
    #[serde(default)]
    pub per_run: SpendLimit,
    /// For the chat's whole life, what a resumed chat spent before
    /// included.
    #[serde(default)]
    pub per_chat: SpendLimit,
}

impl CostBudget {
    /// With `limit` on each message.
    pub fn per_message(mut self, limit: SpendLimit) -> Self {
        self.per_message = limit;
        self
    }

    /// With `limit` on this run.
    pub fn per_run(mut self, limit: SpendLimit) -> Self {
        self.per_run = limit;
        self
    }

    /// With `limit` on the chat's whole life.
    pub fn per_chat(mut self, limit: SpendLimit) -> Self {
        self.per_chat = limit;
        self
    }

    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        self.per_message.is_set() || self.per_run.is_set() || self.per_chat.is_set()
    }
}

/// The session's totals.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Spending {
    /// The message in progress (or the last one).
    pub(super) message: Spend,
    /// Since the session was built in this process.
    pub(super) run: Spend,
    /// The chat's whole life.
    pub(super) chat: Spend,
}

/// What `usage` on `info` cost, by the session's prices.
pub(super) fn cost(shared: &Shared, info: &ModelInfo, usage: &Usage) -> Cost {
    pricing::cost_of(
        &shared.config.prices,
        &info.provider,
        &info.model,
        info.location,
        usage,
    )
}

/// Count a model turn's `usage`, which cost `cost`.
pub(super) fn record(state: &mut State, usage: Usage, cost: Cost) {
    let spend = &mut state.spend;
    spend.message.add(usage, cost);
    spend.run.add(usage, cost);
    spend.chat.add(usage, cost);
}

/// A new message starts: its total starts from nothing.
pub(super) fn start_message(state: &mut State) {
    state.spend.message = Spend::default();
}

/// The message's and the chat's totals, for `usage` and `busy` events.
pub(super) fn totals(state: &State) -> (Spend, Spend) {
    (state.spend.message, state.spend.chat)
}

/// The totals for the end-of-message `busy` event: none while no turn of
/// the chat has reported usage (a model that reports none has no totals to
/// show, and its events stay as they were).
pub(super) fn end_totals(state: &State) -> (Option<Spend>, Option<Spend>) {
    let chat = state.spend.chat;
    if chat.turns == 0 && chat.usage == Usage::default() {
        return (None, None);
    }
    (Some(state.spend.message), Some(chat))
}

/// The chat's total, for the store.
pub(super) fn chat_total(state: &State) -> Spend {
    state.spend.chat
}

/// Seed the chat's total from a resumed session's: its `cost` when it was
/// kept, else what its `usage` says, priced as unknown (a chat from before
/// costs were kept).
pub(super) fn resume(state: &mut State, usage: Usage, cost: Option<Cost>) {
    let mut chat = Spend::default();
    let unknown = usage != Usage::default();
    chat.add(
        usage,
        cost.unwrap_or(if unknown { Cost::UNPRICED } else { Cost::ZERO }),
    );
    chat.turns = 0;
    state.spend.chat = chat;
}

/// Whether the next model turn, `request` on `info`, whose history is
/// estimated at `history_tokens`, stays within every limit; `Err` says
/// which it would pass, for the `budget` error.
pub(super) fn check(
    shared: &Shared,
    info: &ModelInfo,
    request: &TurnRequest,
    history_tokens: u32,
) -> Result<(), String> {
    let budget = &shared.config.budget;
    if !budget.is_set() {
        return Ok(());
    }
    let (spending, learned) = {
        let state = shared.lock();
        (state.spend, state.overhead.get(&info.id()).copied())
    };
    // The system prompt and tools as the provider counted them on an
    // earlier turn; before the first, by the same 3 characters a token as
    // the history (the fitting's default overhead is a cautious guess, too
    // large to stop on).
    let overhead = learned.unwrap_or_else(|| overhead_estimate(request));
    let estimated_input = history_tokens.saturating_add(overhead);
    let next = Usage::new(estimated_input, 0);
    let next_cost = cost(shared, info, &next);
    let scopes = [
        ("message", &budget.per_message, &spending.message),
        ("run", &budget.per_run, &spending.run),
        ("chat", &budget.per_chat, &spending.chat),
    ];
    for (scope, limit, spent) in scopes {
        if let Some(max) = limit.max_tokens {
            let total = spent.total_tokens();
            if total + u64::from(estimated_input) > max {
                return Err(format!(
                    "Stopped before the next model turn: this {scope} has used {total} tokens, \
                     and the next turn's ~{estimated_input} input tokens would pass the limit of \
                     {max} tokens per {scope}."
                ));
            }
        }
        if let Some(max) = limit.max_usd {
            if !next_cost.priced && info.location == ModelLocation::Cloud {
                return Err(format!(
                    "Stopped before the next model turn: {} has no known price, so the limit \
                     of ${max} per {scope} cannot be kept; add its price with --prices (see \
                     `lrg prices --schema`).",
                    info.id()
                ));
            }
            let so_far = spent.cost.known_usd();
            if so_far + next_cost.known_usd() > max {
                return Err(format!(
                    "Stopped before the next model turn: this {scope} has cost {}, and the \
                     next turn's input (~{estimated_input} tokens, {}) would pass the limit of \
                     ${max} per {scope}.",
                    spent.cost.display(),
                    next_cost.display()
                ));
            }
        }
    }
    Ok(())
}

/// The system prompt and tool specs of `request`, in tokens, at 3
/// characters a token.
fn overhead_estimate(request: &TurnRequest) -> u32 {
    let system = request.system.as_deref().map_or(0, str::len);
    let tools: usize = request
        .tools
        .iter()
        .map(|t| {
            let schema = serde_json::to_string(&t.input_schema).map_or(0, |s| s.len());
            t.name.len() + t.description.len() + schema
        })
        .sum();
    u32::try_from((system + tools) / 3).unwrap_or(u32::MAX)
}

/// Add what the sub-agent `sub` spent to its parent's run and chat totals
/// (the parent's message total too, while that message runs).
pub(crate) fn absorb_sub_agent(parent: &Shared, sub: &ChatSession) {
    let spent = sub.shared.lock().spend.run;
    let mut state = parent.lock();
    state.spend.run.absorb(&spent);
    state.spend.chat.absorb(&spent);
    if state.running.is_some() {
        state.spend.message.absorb(&spent);
    }
}

impl ChatSession {
    /// What this chat has cost over its whole life (what a resumed chat
    /// spent before included), tokens and dollars.
    pub fn spend(&self) -> Spend {
        self.shared.lock().spend.chat
    }

    /// What this session has cost since it was built (or resumed) in this
    /// process.
    pub fn run_spend(&self) -> Spend {
        self.shared.lock().spend.run
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use lrg_providers::pricing::{Price, PriceTable};
    use lrg_providers::{ScriptedCall, ScriptedModel, ScriptedTurn, ToolSpec, Usage};
    use serde_json::json;

    use super::*;
    use crate::events::{ErrorKind, Event};
    use crate::testing::FixedTools;
    use crate::{FixedModel, SessionConfig, TurnOutcome};

    /// A turn that calls `look` and reports 1,000 tokens in, 100 out.
    fn calling(n: usize) -> ScriptedTurn {
        ScriptedTurn {
            text: Some(format!("step {n}")),
            calls: vec![ScriptedCall {
                name: "look".into(),
                arguments: json!({ "n": n }),
            }],
            usage: Some(Usage::new(1_000, 100)),
            ..Default::default()
        }
    }

    fn session(budget: CostBudget) -> ChatSession {
        let tools: Arc<[ToolSpec]> = Arc::from(vec![ToolSpec {
            name: "look".into(),
            description: "Looks.".into(),
            input_schema: json!({"type": "object"}),
            annotations: lrg_providers::ToolAnnotations {
                read_only_hint: Some(true),
                ..Default::default()
            },
            output_schema: None,
        }]);
        let mut prices = PriceTable::empty();
        // $1 per 1,000 in, $10 per 1,000 out: a turn above costs $2.
        prices.set("script:priced", Price::new(1_000.0, 10_000.0));
        let config = SessionConfig {
            prices: Arc::new(prices),
            budget,
            ..SessionConfig::default()
        };
        let model = ScriptedModel::named("priced", (0..5).map(calling).collect());
        ChatSession::builder(Arc::new(FixedModel::new(model)))
            .tools(Arc::new(FixedTools::new(tools)))
            .config(config)
            .build()
    }

    async fn send(session: &ChatSession) -> TurnOutcome {
        let handle = session.send("go").unwrap();
        tokio::time::timeout(Duration::from_secs(10), handle)
            .await
            .unwrap()
    }

    fn budget_errors(session: &ChatSession) -> Vec<String> {
        session
            .events()
            .entries()
            .iter()
            .filter_map(|e| match &e.event {
                Event::Error {
                    message,
                    kind: ErrorKind::Budget,
                } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_budget_hit_mid_message_ends_it_with_a_valid_history() {
        let budget = CostBudget::default().per_message(SpendLimit::default().usd(5.0));
        let session = session(budget);
        let outcome = send(&session).await;
        // Two turns ($4) ran; the third would have passed $5.
        let TurnOutcome::OverBudget { reason } = outcome else {
            panic!("{outcome:?}");
        };
        assert!(reason.contains("$5 per message"), "{reason}");
        assert_eq!(budget_errors(&session), [reason]);
        let spent = session.spend();
        assert_eq!(spent.turns, 2);
        assert_eq!(spent.cost, Cost::usd(4.0));
        let history = session.history();
        assert!(
            super::super::tool_pairing_errors(&history).is_empty(),
            "{history:?}"
        );
        // The user message, then two calls and their results.
        assert_eq!(history.len(), 5, "{history:?}");
        // The end of the message carries its totals.
        let end = session
            .events()
            .entries()
            .iter()
            .rev()
            .find_map(|e| match &e.event {
                Event::Busy {
                    busy: false,
                    message_total,
                    ..
                } => *message_total,
                _ => None,
            });
        assert_eq!(end.unwrap().total_tokens(), 2_200);
    }

    #[tokio::test]
    async fn a_token_limit_counts_the_next_requests_input() {
        let budget = CostBudget::default().per_run(SpendLimit::default().tokens(1_500));
        let session = session(budget);
        let outcome = send(&session).await;
        assert!(
            matches!(outcome, TurnOutcome::OverBudget { .. }),
            "{outcome:?}"
        );
        // 1,100 used, and the next turn reads about 1,000 more.
        assert_eq!(session.run_spend().turns, 1);
        assert!(budget_errors(&session)[0].contains("1100 tokens"));
        assert!(super::super::tool_pairing_errors(&session.history()).is_empty());
    }

    #[tokio::test]
    async fn a_sub_agents_spending_counts_toward_its_parents_chat() {
        let budget = CostBudget::default().per_message(SpendLimit::default().usd(5.0));
        let parent = session(CostBudget::default());
        let sub = session(budget);
        assert!(matches!(send(&sub).await, TurnOutcome::OverBudget { .. }));
        absorb_sub_agent(&parent.shared, &sub);
        assert_eq!(parent.spend().cost, Cost::usd(4.0));
        assert_eq!(parent.run_spend().turns, 2);
    }

    #[test]
    fn a_chat_kept_before_costs_were_resumes_with_an_unknown_cost() {
        let mut old = State::default();
        resume(&mut old, Usage::new(10, 5), None);
        assert_eq!(old.spend.chat.cost, Cost::UNPRICED);
        assert_eq!(end_totals(&old).1.unwrap().total_tokens(), 15);
        // A chat that never reported usage has no totals to show.
        let mut fresh = State::default();
        resume(&mut fresh, Usage::default(), None);
        assert_eq!(end_totals(&fresh), (None, None));
        resume(&mut fresh, Usage::new(1, 1), Some(Cost::usd(0.5)));
        assert_eq!(fresh.spend.chat.cost, Cost::usd(0.5));
    }

    /// A script that says it runs in a cloud.
    struct Cloud(ScriptedModel);

    impl lrg_providers::ChatModel for Cloud {
        fn info(&self) -> ModelInfo {
            ModelInfo::new("openai", "gpt-unknown", ModelLocation::Cloud)
        }

        fn turn(
            &self,
            request: TurnRequest,
            cancel: tokio_util::sync::CancellationToken,
        ) -> lrg_providers::TurnStream {
            self.0.turn(request, cancel)
        }
    }

    #[tokio::test]
    async fn a_dollar_limit_on_an_unpriced_cloud_model_stops_at_once() {
        let budget = CostBudget::default().per_chat(SpendLimit::default().usd(1.0));
        let mut config = SessionConfig {
            budget,
            ..SessionConfig::default()
        };
        config.prices = Arc::new(PriceTable::empty());
        let model = Cloud(ScriptedModel::new(vec![calling(0)]));
        let session = ChatSession::builder(Arc::new(FixedModel::new(model)))
            .config(config)
            .build();
        let outcome = send(&session).await;
        assert!(
            matches!(outcome, TurnOutcome::OverBudget { .. }),
            "{outcome:?}"
        );
        assert!(budget_errors(&session)[0].contains("has no known price"));
    }
}
