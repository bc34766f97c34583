//! Compaction: one tool-free turn that summarizes the conversation, which
//! then replaces it.

use lrg_providers::{Message, ProviderError, TurnRequest};
use tokio_util::sync::CancellationToken;

use super::history::SUMMARY_PREFIX;
use super::run::{TurnFailure, resolve, stream_turn};
use super::{Shared, TurnOutcome};
use crate::context;
use crate::events::{ErrorKind, Event};

const INSTRUCTION: &str = "Summarize our conversation so far so that it can continue from your summary alone: \
what I asked for, what was done (which tools were called and what they found or changed), \
what was decided, and what is still open. Keep names, ids and numbers that matter. \
Write only the summary.";

pub(super) async fn run_compact(shared: &Shared, cancel: &CancellationToken) -> TurnOutcome {
    let model = match resolve(shared, cancel).await {
        Ok(model) => model,
        Err(failure) => return failed(shared, failure),
    };
    let info = model.info();
    // An agent keeps its own conversation: a summary of lrg's copy would be
    // sent to it as a prompt and change nothing it remembers.
    if info.keeps_conversation {
        let error = ProviderError::BadRequest {
            message: format!(
                "`{}` keeps its own conversation, so lrg cannot compact it: use the agent's \
                 own command for that if it lists one, or clear the chat",
                info.id()
            ),
        };
        shared.publish(Event::Error {
            message: error.to_string(),
            kind: ErrorKind::Compact,
        });
        return TurnOutcome::Failed { error };
    }
    let model_key = info.id();
    let mut messages = {
        let state = shared.lock();
        let overhead = state.overhead.get(&model_key).copied();
        let budget = shared.config.context.budget(&info, overhead);
        context::shown_to(&info, context::fit(&state.history, &budget).messages)
    };
    messages.push(Message::user(INSTRUCTION));
    let request = TurnRequest::new(messages).system_opt((shared.system_prompt)(&info, &[]));
    let turn = match stream_turn(shared, model.as_ref(), &request, cancel, false).await {
        Ok(turn) => turn,
        Err(failure) => return failed(shared, failure),
    };
    drop(model);
    let summary = turn.text().trim().to_string();
    if summary.is_empty() {
        let error = ProviderError::Other {
            message: "The model returned an empty summary; the conversation was kept as it was."
                .into(),
        };
        shared.publish(Event::Error {
            message: error.to_string(),
            kind: ErrorKind::Compact,
        });
        return TurnOutcome::Failed { error };
    }
    {
        let mut state = shared.lock();
        state.history = vec![Message::user(format!("{SUMMARY_PREFIX}{summary}"))].into();
        state.generation += 1;
        state.user_seqs.clear();
    }
    // Kept before it is shown: a `compacted` a viewer saw is what a resume
    // has, not the conversation it replaced (a failed store said so in a
    // `warning`, published first).
    super::persist::save(shared).await;
    let seq = shared.publish(Event::Compacted {
        summary: summary.clone(),
    });
    shared.lock().user_seqs = vec![(0, seq)];
    TurnOutcome::Completed {
        text: summary,
        json: None,
    }
}

fn failed(shared: &Shared, failure: TurnFailure) -> TurnOutcome {
    match failure {
        TurnFailure::Stopped => TurnOutcome::Stopped,
        TurnFailure::Failed(error) => {
            shared.publish(Event::Error {
                message: format!("Could not compact the conversation: {error}"),
                kind: ErrorKind::of(&error),
            });
            TurnOutcome::Failed { error }
        }
        TurnFailure::LocalOnly(error) => {
            shared.publish(Event::Error {
                message: format!("Could not compact the conversation: {error}"),
                kind: ErrorKind::LocalOnly,
            });
            TurnOutcome::Failed { error }
        }
    }
}
