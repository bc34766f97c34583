//! Which tools a model turn is offered when tool search is on
//! ([`crate::tools::search`]): the always-offered, the ones this chat used,
//! lrg's own, what was found for this message, and `search_tools`; and the
//! `search_tools` call itself.

use std::collections::HashSet;
use std::sync::Arc;

use lrg_providers::{ModelInfo, Part, Role, ToolCall, ToolSpec};

use super::Shared;
use crate::events::Event;
use crate::tools::ToolOutput;
use crate::tools::search::{self, PRE_OFFERED, SEARCH_TOOL, ToolIndex};

/// What a session keeps for tool search: the index of the list it was
/// built from, and what was found for the message being answered.
#[derive(Default)]
pub(super) struct SearchState {
    /// The list indexed (compared by pointer: the tool host hands out the
    /// same list until its tools change) and its index.
    index: Option<(Arc<[ToolSpec]>, Arc<ToolIndex>)>,
    /// Found for this message (by a search, or offered up front).
    found: HashSet<String>,
    /// Whether this message is searching at all.
    active: bool,
}

/// A new message: nothing found yet.
pub(super) fn start_message(shared: &Shared) {
    let mut state = shared.lock();
    state.search.found.clear();
    state.search.active = false;
}

/// The tools to offer this turn out of `offered` (those the rules do not
/// block), and `specs` (every tool the turn may call) with the search tool
/// added when search is on. `first`: the message's first turn, when the
/// message itself is searched and its best matches offered.
pub(super) fn narrow(
    shared: &Shared,
    specs: &mut Arc<[ToolSpec]>,
    offered: Arc<[ToolSpec]>,
    info: &ModelInfo,
    first: bool,
) -> Arc<[ToolSpec]> {
    if !search::searches(shared.config.tool_search, &offered, info.context_window) {
        return offered;
    }
    let index = index_of(shared, &offered);
    let mut keep: HashSet<String> = HashSet::new();
    let mut pre_offered = Vec::new();
    {
        let mut state = shared.lock();
        state.search.active = true;
        if first {
            let text = last_user_text(&state.history);
            for name in index.search(&text, PRE_OFFERED) {
                if state.search.found.insert(name.to_owned()) {
                    pre_offered.push(name.to_owned());
                }
            }
        }
        keep.extend(state.search.found.iter().cloned());
        keep.extend(used_tools(&state.history));
    }
    keep.extend(
        offered
            .iter()
            .filter(|s| shared.tools.policy(&s.name).always_offer)
            .map(|s| s.name.clone()),
    );
    if !pre_offered.is_empty() {
        shared.publish(Event::ToolsFound {
            query: None,
            names: pre_offered,
        });
    }
    // Every tool stays callable: one the model names without finding it
    // runs as if found.
    if !specs.iter().any(|s| s.name == SEARCH_TOOL) {
        let mut all = specs.to_vec();
        all.push(search::search_tool_spec());
        *specs = all.into();
    }
    search::offered_subset(&offered, &keep).into()
}

/// Whether `call` is the session's own `search_tools` (while searching).
pub(super) fn is_search(shared: &Shared, call: &ToolCall) -> bool {
    call.name == SEARCH_TOOL && shared.lock().search.active
}

/// Run a `search_tools` call: what was found joins the offered set for the
/// rest of the message, and a `tools_found` event says what.
pub(super) fn run_search(shared: &Shared, call: &ToolCall) -> ToolOutput {
    let (query, limit) = match search::parse_call(&call.arguments) {
        Ok(parsed) => parsed,
        Err(why) => {
            return ToolOutput::error(format!("Invalid arguments for `{SEARCH_TOOL}`: {why}"));
        }
    };
    let indexed = shared.lock().search.index.clone();
    let Some((specs, index)) = indexed else {
        return ToolOutput::error("Tool search is not on for this chat: every tool is offered.");
    };
    let names: Vec<String> = index
        .search(&query, limit)
        .into_iter()
        .map(str::to_owned)
        .collect();
    shared.lock().search.found.extend(names.iter().cloned());
    let text = {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        search::describe_found(&specs, &refs)
    };
    shared.publish(Event::ToolsFound {
        query: Some(query),
        names,
    });
    ToolOutput::text(text)
}

fn index_of(shared: &Shared, offered: &Arc<[ToolSpec]>) -> Arc<ToolIndex> {
    if let Some((list, index)) = &shared.lock().search.index
        && (Arc::ptr_eq(list, offered) || list[..] == offered[..])
    {
        return index.clone();
    }
    // Built outside the lock: indexing hundreds of tools takes a while.
    let index = Arc::new(ToolIndex::new(offered));
    shared.lock().search.index = Some((offered.clone(), index.clone()));
    index
}

fn last_user_text(history: &[lrg_providers::Message]) -> String {
    history
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(lrg_providers::Message::text)
        .unwrap_or_default()
}

/// Tools this chat has called (each stays offered for the chat).
fn used_tools(history: &[lrg_providers::Message]) -> impl Iterator<Item = String> + '_ {
    history
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolCall(call) if call.name != SEARCH_TOOL => Some(call.name.clone()),
            _ => None,
        })
}
