//! Fitting a conversation into a model's context window.
//!
//! Pure functions, usable outside a session. Sizes are estimates: 3
//! characters per token and a fixed cost per image, plus what the system
//! prompt and the tools cost, which the session learns from the first turn's
//! reported prompt tokens ([`learn_overhead`]; [`DEFAULT_OVERHEAD`] until
//! then). When the conversation does not fit, the oldest tool results give
//! up their text and images first (the model can call the tool again), then
//! the oldest exchanges go whole; the last exchange (the last user message
//! and everything after it) is never touched. Independently, only the
//! newest few images stay pixels.
//!
//! A session fits its history before every model turn. It keeps each
//! message's estimate with the history ([`Estimates`]), so a fit measures
//! only what was added since the last one and is otherwise a walk over
//! numbers ([`fit_estimated`]). The history is a shared [`Messages`]: when
//! nothing gives way, what is sent is that same history (a reference-count
//! bump), not a copy of every message.

use lrg_providers::images::{count_images, replace_images};
use lrg_providers::{Message, Messages, ModelInfo, ModelLocation, Part, Role};

/// Characters per estimated token.
pub const CHARS_PER_TOKEN: usize = 3;
/// Estimated tokens per image.
pub const IMAGE_TOKENS: u32 = 600;
/// Assumed cost of system prompt plus tools before a turn has reported it.
pub const DEFAULT_OVERHEAD: u32 = 4_000;
/// Window assumed when a local model or server does not report one.
pub const DEFAULT_WINDOW: u32 = 8_192;
/// Estimated tokens of message framing (role markers and the like).
const MESSAGE_TOKENS: u32 = 4;

/// What a removed tool result is replaced with.
pub const RESULT_PLACEHOLDER: &str =
    "[This tool result was removed to fit the context window; call the tool again if you need it.]";
/// What an image beyond the newest few is replaced with.
pub const IMAGE_PLACEHOLDER: &str = "[An image was here; only the newest images are kept.]";

/// How a session budgets context, per where the model runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextPolicy {
    /// Window assumed for a local model or server that reports none.
    pub default_window: u32,
    /// The most a cloud model is given, whatever its window: every turn
    /// resends (and is billed for) the whole conversation.
    pub cloud_window_cap: u32,
    /// Tokens kept free for the answer, by location (capped at a quarter of
    /// the window).
    pub answer_reserve_local: u32,
    /// Answer reserve on an AI server.
    pub answer_reserve_server: u32,
    /// Answer reserve for a cloud model.
    pub answer_reserve_cloud: u32,
    /// Estimated tokens per image.
    pub image_tokens: u32,
    /// Images kept as pixels for local models and servers.
    pub images_local: usize,
    /// Images kept as pixels for cloud models.
    pub images_cloud: usize,
}

impl Default for ContextPolicy {
    fn default() -> Self {
        Self {
            default_window: DEFAULT_WINDOW,
            cloud_window_cap: 64_000,
            answer_reserve_local: 2_048,
            answer_reserve_server: 2_048,
            answer_reserve_cloud: 8_192,
            image_tokens: IMAGE_TOKENS,
            images_local: 2,
            images_cloud: 4,
        }
    }
}

/// The numbers one fit works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The window, in tokens.
    pub window: u32,
    /// Kept free for the answer.
    pub answer_reserve: u32,
    /// System prompt plus tools.
    pub overhead: u32,
    /// Estimated tokens per image.
    pub image_tokens: u32,
    /// Images kept as pixels (newest first).
    pub max_images: usize,
}

impl ContextPolicy {
    /// The budget for `model`, with the overhead learned so far (if any).
    pub fn budget(&self, model: &ModelInfo, overhead: Option<u32>) -> Budget {
        let (window, reserve, images) = match model.location {
            ModelLocation::Cloud => (
                model
                    .context_window
                    .unwrap_or(self.cloud_window_cap)
                    .min(self.cloud_window_cap),
                self.answer_reserve_cloud,
                self.images_cloud,
            ),
            ModelLocation::Server => (
                model.context_window.unwrap_or(self.default_window),
                self.answer_reserve_server,
                self.images_local,
            ),
            ModelLocation::Local => (
                model.context_window.unwrap_or(self.default_window),
                self.answer_reserve_local,
                self.images_local,
            ),
        };
        Budget {
            window,
            answer_reserve: reserve.min(window / 4),
            overhead: overhead.unwrap_or(DEFAULT_OVERHEAD),
            image_tokens: self.image_tokens,
            max_images: images,
        }
    }
}

fn text_tokens(chars: usize) -> u32 {
    u32::try_from(chars.div_ceil(CHARS_PER_TOKEN)).unwrap_or(u32::MAX)
}

/// Estimated tokens of one part.
pub fn estimate_part(part: &Part, image_tokens: u32) -> u32 {
    match part {
        Part::Text { text } | Part::Reasoning { text } => text_tokens(text.len()),
        Part::Image(_) => image_tokens,
        Part::ToolCall(call) => {
            text_tokens(call.name.len() + call.id.len() + json_len(&call.arguments))
        }
        Part::ToolResult(result) => result
            .parts
            .iter()
            .map(|p| estimate_part(p, image_tokens))
            .fold(
                text_tokens(result.name.len() + result.call_id.len()),
                u32::saturating_add,
            ),
        Part::Native(native) => text_tokens(json_len(&native.value)),
    }
}

fn json_len(value: &serde_json::Value) -> usize {
    serde_json::to_string(value).map(|s| s.len()).unwrap_or(0)
}

/// Estimated tokens of one message.
pub fn estimate_message(message: &Message, image_tokens: u32) -> u32 {
    message
        .parts
        .iter()
        .map(|p| estimate_part(p, image_tokens))
        .fold(MESSAGE_TOKENS, u32::saturating_add)
}

/// Estimated tokens of a conversation.
pub fn estimate(messages: &[Message], image_tokens: u32) -> u32 {
    messages
        .iter()
        .map(|m| estimate_message(m, image_tokens))
        .fold(0, u32::saturating_add)
}

/// Per-message estimates of a history that grows at its end, kept between
/// fits so that each message is measured once.
#[derive(Debug, Clone, Default)]
pub struct Estimates {
    generation: u64,
    image_tokens: u32,
    sizes: Vec<u32>,
}

impl Estimates {
    /// No estimates yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`estimate_message`] of every message of `history`, measuring only
    /// those added since the last call. `generation` must change whenever
    /// the history is cut back or replaced rather than extended; the kept
    /// estimates are dropped then (and when the history got shorter, or
    /// `image_tokens` changed).
    pub fn update(&mut self, history: &[Message], generation: u64, image_tokens: u32) -> &[u32] {
        if generation != self.generation
            || image_tokens != self.image_tokens
            || history.len() < self.sizes.len()
        {
            self.sizes.clear();
            self.generation = generation;
            self.image_tokens = image_tokens;
        }
        let known = self.sizes.len();
        self.sizes.extend(
            history[known..]
                .iter()
                .map(|m| estimate_message(m, image_tokens)),
        );
        &self.sizes
    }
}

/// What the system prompt and tools cost, learned from a turn's reported
/// prompt tokens and the conversation that was sent with it.
pub fn learn_overhead(prompt_tokens: u32, sent: &[Message], image_tokens: u32) -> u32 {
    prompt_tokens.saturating_sub(estimate(sent, image_tokens))
}

/// A conversation fitted into a budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// What to send: the history itself (shared, not copied) when nothing
    /// gave way.
    pub messages: Messages,
    /// Its estimated size, overhead and answer reserve included.
    pub estimated_tokens: u32,
    /// Tool results whose content was replaced by [`RESULT_PLACEHOLDER`].
    pub stripped_results: usize,
    /// Images replaced by [`IMAGE_PLACEHOLDER`].
    pub dropped_images: usize,
    /// Whole messages left out from the start (oldest exchanges).
    pub dropped_messages: usize,
    /// Whether it fits; when even the last exchange alone is too big it is
    /// sent anyway and the model reports the overflow.
    pub fits: bool,
}

/// `messages` as `model` can take them: for a model that cannot see images,
/// each image becomes a short note of what it was
/// ([`lrg_providers::images::image_note`]), so the chat goes on.
pub fn shown_to(model: &ModelInfo, messages: Messages) -> Messages {
    if model.vision {
        return messages;
    }
    match lrg_providers::images::describe_images(&messages) {
        std::borrow::Cow::Borrowed(_) => messages,
        std::borrow::Cow::Owned(described) => described.into(),
    }
}

/// Index of the first message of the last exchange: the last user message.
pub fn last_exchange_start(messages: &[Message]) -> usize {
    messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(0)
}

/// Fit `history` into `budget`. See the [module docs](self) for the order in
/// which things give way.
///
/// Decides on the borrowed history first and copies only what changes: a
/// history that fits whole is sent as it is (shared), and a long one whose
/// oldest part is left out costs little more than its estimate.
pub fn fit(history: &Messages, budget: &Budget) -> Fitted {
    let sizes: Vec<u32> = history
        .iter()
        .map(|m| estimate_message(m, budget.image_tokens))
        .collect();
    fit_estimated(history, &sizes, budget)
}

/// [`fit`] with each message's estimate known already: `sizes[i]` is
/// [`estimate_message`] of `history[i]` at `budget.image_tokens`, as
/// [`Estimates::update`] keeps them. Nothing is measured again but what
/// gives way. Sizes of another length than the history are not trusted:
/// the history is measured.
pub fn fit_estimated(history: &Messages, sizes: &[u32], budget: &Budget) -> Fitted {
    if sizes.len() != history.len() {
        return fit(history, budget);
    }
    let protected = last_exchange_start(history);
    let drop_images = images_to_drop(history, protected, budget.max_images);
    let placeholder_tokens = text_tokens(IMAGE_PLACEHOLDER.len());
    let mut sizes: Vec<u32> = sizes
        .iter()
        .zip(&drop_images)
        .map(|(&size, &dropped)| {
            if dropped == 0 {
                return size;
            }
            let n = u32::try_from(dropped).unwrap_or(u32::MAX);
            size.saturating_sub(n.saturating_mul(budget.image_tokens))
                .saturating_add(n.saturating_mul(placeholder_tokens))
        })
        .collect();
    let fixed = budget.overhead.saturating_add(budget.answer_reserve);
    let mut total = sizes.iter().fold(fixed, |a, &b| a.saturating_add(b));

    let mut stripped = vec![false; history.len()];
    let mut stripped_results = 0;
    for (i, message) in history.iter().enumerate().take(protected) {
        if total <= budget.window {
            break;
        }
        if message.role != Role::Tool {
            continue;
        }
        stripped[i] = true;
        stripped_results += message
            .parts
            .iter()
            .filter(|p| matches!(p, Part::ToolResult(_)))
            .count();
        let size = stripped_estimate(message, budget.image_tokens);
        total = total.saturating_sub(sizes[i]).saturating_add(size);
        sizes[i] = size;
    }

    // Still too big: leave out the oldest exchanges whole, cutting only at a
    // user message so no tool result loses its call.
    let mut cut = 0;
    while total > budget.window && cut < protected {
        let next = (cut + 1..protected)
            .find(|&k| history[k].role == Role::User)
            .unwrap_or(protected);
        total = sizes[cut..next]
            .iter()
            .fold(total, |a, &b| a.saturating_sub(b));
        cut = next;
    }

    let unchanged = cut == 0 && !stripped.contains(&true) && drop_images.iter().all(|&n| n == 0);
    let mut dropped_images = 0;
    let messages = if unchanged {
        // The usual case: send the history itself, copying nothing.
        history.clone()
    } else {
        changed(history, cut, &stripped, &drop_images, &mut dropped_images)
    };

    Fitted {
        messages,
        estimated_tokens: total,
        stripped_results,
        dropped_images,
        dropped_messages: cut,
        fits: total <= budget.window,
    }
}

/// The history from `cut` on, with the results of `stripped` messages and
/// the oldest `drop_images` images replaced by placeholders; the rest cloned.
fn changed(
    history: &[Message],
    cut: usize,
    stripped: &[bool],
    drop_images: &[usize],
    dropped_images: &mut usize,
) -> Messages {
    history[cut..]
        .iter()
        .enumerate()
        .map(|(j, message)| {
            let i = cut + j;
            if stripped[i] {
                strip_results(message)
            } else if drop_images[i] > 0 {
                *dropped_images += drop_images[i];
                let mut left = drop_images[i];
                Message {
                    role: message.role,
                    parts: replace_images(&message.parts, &mut left, &|_| IMAGE_PLACEHOLDER.into()),
                }
            } else {
                message.clone()
            }
        })
        .collect()
}

/// [`estimate_message`] of [`strip_results`]`(message)`, without building it.
fn stripped_estimate(message: &Message, image_tokens: u32) -> u32 {
    let placeholder = text_tokens(RESULT_PLACEHOLDER.len());
    message
        .parts
        .iter()
        .map(|part| match part {
            Part::ToolResult(r) => {
                text_tokens(r.name.len() + r.call_id.len()).saturating_add(placeholder)
            }
            other => estimate_part(other, image_tokens),
        })
        .fold(MESSAGE_TOKENS, u32::saturating_add)
}

/// The message with every tool result's content replaced by
/// [`RESULT_PLACEHOLDER`], without copying that content.
fn strip_results(message: &Message) -> Message {
    let parts = message
        .parts
        .iter()
        .map(|part| match part {
            Part::ToolResult(r) => Part::ToolResult(lrg_providers::ToolResult {
                call_id: r.call_id.clone(),
                name: r.name.clone(),
                parts: vec![Part::text(RESULT_PLACEHOLDER)],
                is_error: r.is_error,
            }),
            other => other.clone(),
        })
        .collect();
    Message {
        role: message.role,
        parts,
    }
}

/// How many images to replace in each message (its oldest ones) so only the
/// newest `keep` stay. Images of the last exchange (from `protected` on)
/// always stay and count towards `keep`.
fn images_to_drop(messages: &[Message], protected: usize, keep: usize) -> Vec<usize> {
    let mut drop = vec![0; messages.len()];
    let mut seen = 0usize;
    for (i, message) in messages.iter().enumerate().rev() {
        let count = count_images(&message.parts);
        if i < protected {
            let kept = count.min(keep.saturating_sub(seen));
            drop[i] = count - kept;
        }
        seen += count;
    }
    drop
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use lrg_providers::{Image, ToolCall, ToolResult};
    use serde_json::json;

    fn image() -> Part {
        Part::Image(Image {
            mime: "image/png".into(),
            data: Bytes::from_static(b"png"),
        })
    }

    fn exchange(n: usize, result_chars: usize) -> Vec<Message> {
        let call = ToolCall {
            id: format!("c{n}"),
            name: "read".into(),
            arguments: json!({"n": n}),
        };
        vec![
            Message::user(format!("question {n}")),
            Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall(call.clone())],
            },
            Message::tool_results([ToolResult::text(&call, "x".repeat(result_chars), false)]),
            Message::assistant(format!("answer {n}")),
        ]
    }

    fn budget(window: u32) -> Budget {
        Budget {
            window,
            answer_reserve: 100,
            overhead: 100,
            image_tokens: 600,
            max_images: 2,
        }
    }

    #[test]
    fn estimates_three_chars_per_token_and_a_fixed_cost_per_image() {
        let m = Message {
            role: Role::User,
            parts: vec![Part::text("abcdefg"), image()],
        };
        assert_eq!(estimate_message(&m, 600), MESSAGE_TOKENS + 3 + 600);
        assert_eq!(
            learn_overhead(5_000, std::slice::from_ref(&m), 600),
            5_000 - 607
        );
        assert_eq!(learn_overhead(10, &[m], 600), 0);
    }

    /// A history with images in tool results and user messages, for the
    /// kept-estimates checks.
    fn mixed_history(exchanges: usize) -> Vec<Message> {
        let mut history: Vec<Message> = (0..exchanges).flat_map(|n| exchange(n, 900)).collect();
        for (i, m) in history.iter_mut().enumerate() {
            if i % 7 == 0 {
                m.parts.push(image());
            }
            if let Some(Part::ToolResult(r)) = m.parts.first_mut()
                && i % 3 == 0
            {
                r.parts.push(image());
            }
        }
        history
    }

    #[test]
    fn kept_estimates_fit_exactly_as_measuring_again() {
        let mut history: Messages = mixed_history(3).into();
        let mut estimates = Estimates::new();
        for n in 3..12 {
            history.extend(exchange(n, 900));
            let sizes = estimates.update(&history, 0, 600).to_vec();
            for window in [600, 2_000, 5_000, 100_000] {
                assert_eq!(
                    fit_estimated(&history, &sizes, &budget(window)),
                    fit(&history, &budget(window)),
                    "{n} exchanges into {window}"
                );
            }
        }
        // Only the new messages were measured: the kept ones stay as they were.
        let before = estimates.update(&history, 0, 600).to_vec();
        history.push(Message::user("one more"));
        let after = estimates.update(&history, 0, 600).to_vec();
        assert_eq!(after[..before.len()], before[..]);
        assert_eq!(after.len(), history.len());
    }

    #[test]
    fn kept_estimates_start_over_when_the_history_is_replaced() {
        let mut estimates = Estimates::new();
        let long: Messages = mixed_history(4).into();
        estimates.update(&long, 0, 600);
        // Replaced by something of the same length: the generation says so.
        let other: Vec<Message> = (0..long.len())
            .map(|i| Message::user("z".repeat(i * 10)))
            .collect();
        let sizes = estimates.update(&other, 1, 600).to_vec();
        let measured: Vec<u32> = other.iter().map(|m| estimate_message(m, 600)).collect();
        assert_eq!(sizes, measured);
        // Another image cost, or a shorter history, is measured again too.
        assert_eq!(
            estimates.update(&long, 1, 100).to_vec(),
            long.iter()
                .map(|m| estimate_message(m, 100))
                .collect::<Vec<_>>()
        );
        assert_eq!(estimates.update(&long[..2], 1, 100).len(), 2);
        // Sizes that do not match the history are not trusted.
        assert_eq!(
            fit_estimated(&long, &[1, 2, 3], &budget(2_000)),
            fit(&long, &budget(2_000))
        );
    }

    #[test]
    fn a_stripped_estimate_is_that_of_the_stripped_message() {
        for m in mixed_history(3) {
            assert_eq!(
                stripped_estimate(&m, 600),
                estimate_message(&strip_results(&m), 600)
            );
        }
    }

    #[test]
    fn fits_untouched_when_small() {
        let history: Messages = (0..3).flat_map(|n| exchange(n, 30)).collect();
        let fitted = fit(&history, &budget(10_000));
        assert_eq!(fitted.messages, history);
        assert!(
            Messages::ptr_eq(&fitted.messages, &history),
            "a history that fits is sent as it is, not copied"
        );
        assert!(fitted.fits);
        assert_eq!((fitted.stripped_results, fitted.dropped_messages), (0, 0));
    }

    #[test]
    fn oldest_tool_results_go_first_and_the_last_exchange_stays() {
        let history: Messages = (0..4).flat_map(|n| exchange(n, 3_000)).collect();
        // Each result is ~1,000 tokens; room for about two of them.
        let fitted = fit(&history, &budget(2_600));
        assert!(fitted.fits, "{fitted:?}");
        assert_eq!(fitted.dropped_messages, 0);
        assert_eq!(fitted.stripped_results, 2);
        let texts: Vec<String> = fitted
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| match &m.parts[0] {
                Part::ToolResult(r) => r.text_content(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(texts[0], RESULT_PLACEHOLDER);
        assert_eq!(texts[1], RESULT_PLACEHOLDER);
        assert_eq!(texts[2].len(), 3_000);
        assert_eq!(texts[3].len(), 3_000, "last exchange untouched");
    }

    #[test]
    fn drops_whole_exchanges_when_stripping_is_not_enough() {
        let mut history: Messages = (0..5).flat_map(|n| exchange(n, 30)).collect();
        history.make_mut()[4] = Message::user("y".repeat(3_000));
        let last = exchange(9, 300);
        history.extend(last.clone());
        let fitted = fit(&history, &budget(800));
        assert!(fitted.fits, "{fitted:?}");
        assert_eq!(
            fitted.messages[0].role,
            Role::User,
            "cut at an exchange boundary"
        );
        assert_eq!(fitted.messages[fitted.messages.len() - 4..], last[..]);
        assert_eq!(fitted.dropped_messages % 4, 0);
        assert!(fitted.estimated_tokens <= 800);
        // Nothing fits the last exchange alone: it is sent anyway.
        let fitted = fit(&history, &budget(300));
        assert!(!fitted.fits);
        assert_eq!(fitted.messages, last);
    }

    #[test]
    fn only_the_newest_images_stay() {
        let call = ToolCall {
            id: "c".into(),
            name: "shot".into(),
            arguments: json!({}),
        };
        let history: Messages = vec![
            Message {
                role: Role::User,
                parts: vec![Part::text("look"), image()],
            },
            Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall(call.clone())],
            },
            Message::tool_results([ToolResult {
                call_id: "c".into(),
                name: "shot".into(),
                parts: vec![image(), image()],
                is_error: false,
            }]),
            Message {
                role: Role::User,
                parts: vec![Part::text("and these"), image(), image(), image()],
            },
        ]
        .into();
        let fitted = fit(&history, &budget(100_000));
        assert_eq!(
            fitted.dropped_images, 3,
            "three newest are in the last exchange, which keeps them"
        );
        assert_eq!(fitted.messages[3], history[3]);
        assert_eq!(fitted.messages[0].parts[1], Part::text(IMAGE_PLACEHOLDER));
        let mut cloud = budget(100_000);
        cloud.max_images = 4;
        assert_eq!(fit(&history, &cloud).dropped_images, 2);
    }

    #[test]
    fn budgets_by_location() {
        let mut info = ModelInfo::new("p", "m", ModelLocation::Local);
        let policy = ContextPolicy::default();
        let b = policy.budget(&info, None);
        assert_eq!(
            (b.window, b.answer_reserve, b.overhead, b.max_images),
            (8_192, 2_048, 4_000, 2)
        );
        info.location = ModelLocation::Cloud;
        info.context_window = Some(1_000_000);
        let b = policy.budget(&info, Some(1_234));
        assert_eq!(
            (b.window, b.answer_reserve, b.overhead, b.max_images),
            (64_000, 8_192, 1_234, 4)
        );
        info.location = ModelLocation::Server;
        info.context_window = Some(4_096);
        let b = policy.budget(&info, None);
        assert_eq!(
            (b.window, b.answer_reserve, b.max_images),
            (4_096, 1_024, 2)
        );
    }
}
