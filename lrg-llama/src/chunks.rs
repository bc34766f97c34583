//! The conversation as a sequence of chunks, and where a new prompt may reuse
//! the KV cache of the last one.
//!
//! With images, a prompt is no longer a flat token list: it is text tokens and
//! image chunks (an image's embeddings, with the model's begin/end tokens
//! around them). The reference design's rule for KV reuse holds chunk by
//! chunk: text is compared token by token, an image equals another only when
//! the hashes of their bytes are equal, and the cache is kept up to the first
//! difference. An image after that point is evaluated again even if it is the
//! same picture, since what precedes it changed.
//!
//! Pure bookkeeping, no model: [`Chunks::plan`] says where to cut the cache and
//! what to evaluate; the worker does the evaluating.

/// One piece of a prompt as the KV cache holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Text tokens, one position each.
    Text(Vec<i32>),
    /// One image, evaluated as a whole.
    Image {
        /// Hash of the image's encoded bytes: equal hashes, equal images.
        hash: u64,
        /// KV-cache cells it fills (its embeddings plus begin/end tokens).
        tokens: u32,
        /// Positions it advances (fewer than `tokens` for M-RoPE models).
        positions: u32,
    },
}

impl Chunk {
    fn tokens(&self) -> u32 {
        match self {
            Chunk::Text(t) => len_u32(t.len()),
            Chunk::Image { tokens, .. } => *tokens,
        }
    }

    fn positions(&self) -> u32 {
        match self {
            Chunk::Text(t) => len_u32(t.len()),
            Chunk::Image { positions, .. } => *positions,
        }
    }
}

fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A prompt, or the conversation held in the KV cache, as chunks in order.
///
/// Adjacent text is kept in one chunk and empty text is never stored, so two
/// token-equal conversations have equal chunks however they were built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Chunks {
    chunks: Vec<Chunk>,
}

/// Where a new prompt's evaluation starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Chunks of the new prompt kept whole.
    pub whole: usize,
    /// Tokens kept of the next chunk (text only; 0 for an image).
    pub partial: usize,
    /// KV-cache positions kept: the cache is cut from here on.
    pub positions: u32,
    /// KV-cache cells kept (tokens, counting an image's as its cells).
    pub tokens: u32,
}

impl Chunks {
    /// No chunks.
    pub fn new() -> Self {
        Self::default()
    }

    /// The chunks, in order.
    pub fn as_slice(&self) -> &[Chunk] {
        &self.chunks
    }

    /// Appends text tokens (to the last chunk when it is text).
    pub fn push_tokens(&mut self, tokens: &[i32]) {
        if tokens.is_empty() {
            return;
        }
        if let Some(Chunk::Text(last)) = self.chunks.last_mut() {
            last.extend_from_slice(tokens);
        } else {
            self.chunks.push(Chunk::Text(tokens.to_vec()));
        }
    }

    /// Appends one image.
    pub fn push_image(&mut self, hash: u64, tokens: u32, positions: u32) {
        self.chunks.push(Chunk::Image {
            hash,
            tokens,
            positions,
        });
    }

    /// Appends a chunk (merging text into a text chunk before it).
    pub fn push(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::Text(t) => self.push_tokens(t),
            Chunk::Image {
                hash,
                tokens,
                positions,
            } => self.push_image(*hash, *tokens, *positions),
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.chunks.clear();
    }

    /// KV-cache cells filled.
    pub fn tokens(&self) -> u32 {
        self.chunks.iter().map(Chunk::tokens).sum()
    }

    /// Positions advanced: where the next chunk goes.
    pub fn positions(&self) -> u32 {
        self.chunks.iter().map(Chunk::positions).sum()
    }

    /// The hashes of the images, in order.
    pub fn image_hashes(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks.iter().filter_map(|c| match c {
            Chunk::Image { hash, .. } => Some(*hash),
            Chunk::Text(_) => None,
        })
    }

    /// The text tokens when there is no image.
    pub fn text_only(&self) -> Option<Vec<i32>> {
        let mut out = Vec::new();
        for chunk in &self.chunks {
            match chunk {
                Chunk::Text(t) => out.extend_from_slice(t),
                Chunk::Image { .. } => return None,
            }
        }
        Some(out)
    }

    /// Where to cut the cache holding `self` so that `new` can be evaluated
    /// after it: the longest prefix of `new` these chunks share. At least one
    /// chunk piece of `new` is always left to evaluate (its logits start the
    /// answer): a text token, or the whole last image.
    pub fn plan(&self, new: &Chunks) -> Plan {
        let mut plan = Plan {
            whole: 0,
            partial: 0,
            positions: 0,
            tokens: 0,
        };
        for (held, next) in self.chunks.iter().zip(&new.chunks) {
            if held == next {
                plan.whole += 1;
                plan.positions += next.positions();
                plan.tokens += next.tokens();
                continue;
            }
            if let (Chunk::Text(a), Chunk::Text(b)) = (held, next) {
                let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                plan.partial = common;
                plan.positions += len_u32(common);
                plan.tokens += len_u32(common);
            }
            break;
        }
        // Everything shared: give back the last token (or the last image).
        let all = plan.whole == new.chunks.len();
        let all_of_next = match new.chunks.get(plan.whole) {
            Some(Chunk::Text(t)) => plan.partial == t.len() && plan.whole + 1 == new.chunks.len(),
            _ => false,
        };
        if all && plan.whole > 0 {
            plan.whole -= 1;
            match &new.chunks[plan.whole] {
                Chunk::Text(t) => {
                    plan.partial = t.len() - 1;
                    plan.positions -= 1;
                    plan.tokens -= 1;
                }
                image => {
                    plan.partial = 0;
                    plan.positions -= image.positions();
                    plan.tokens -= image.tokens();
                }
            }
        } else if all_of_next && plan.partial > 0 {
            plan.partial -= 1;
            plan.positions -= 1;
            plan.tokens -= 1;
        }
        plan
    }

    /// Keeps only what `plan` keeps of `new` (the shared prefix); the caller
    /// cut the cache at `plan.positions`.
    pub fn keep(&mut self, new: &Chunks, plan: &Plan) {
        let mut kept = Chunks::new();
        for chunk in &new.chunks[..plan.whole] {
            kept.push(chunk);
        }
        if let Some(Chunk::Text(t)) = new.chunks.get(plan.whole) {
            kept.push_tokens(&t[..plan.partial]);
        }
        *self = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds chunks from `T` (tokens) and `I` (image hash, 3 tokens, 3 positions).
    enum P<'a> {
        T(&'a [i32]),
        I(u64),
    }
    use P::{I, T};

    fn chunks(parts: &[P<'_>]) -> Chunks {
        let mut c = Chunks::new();
        for p in parts {
            match p {
                T(t) => c.push_tokens(t),
                I(h) => c.push_image(*h, 3, 3),
            }
        }
        c
    }

    fn plan(held: &[P<'_>], new: &[P<'_>]) -> Plan {
        chunks(held).plan(&chunks(new))
    }

    fn p(whole: usize, partial: usize, positions: u32) -> Plan {
        Plan {
            whole,
            partial,
            positions,
            tokens: positions,
        }
    }

    #[test]
    fn nothing_held_evaluates_everything() {
        assert_eq!(plan(&[], &[T(&[1, 2]), I(7), T(&[3])]), p(0, 0, 0));
    }

    #[test]
    fn an_identical_prefix_with_an_image_is_kept_and_only_new_text_evaluated() {
        let held = [T(&[1, 2, 3]), I(7), T(&[4, 5])];
        let new = [T(&[1, 2, 3]), I(7), T(&[4, 5, 6, 7])];
        // 3 text + 3 image + 2 text kept; tokens 6 and 7 evaluated.
        assert_eq!(plan(&held, &new), p(2, 2, 8));
    }

    #[test]
    fn an_image_inserted_into_the_text_cuts_at_its_place() {
        let held = [T(&[1, 2, 3, 4])];
        let new = [T(&[1, 2]), I(7), T(&[3, 4, 5])];
        assert_eq!(plan(&held, &new), p(0, 2, 2));
    }

    #[test]
    fn an_image_replaced_by_a_placeholder_cuts_before_it() {
        let held = [T(&[1, 2]), I(7), T(&[3, 4])];
        let new = [T(&[1, 2, 90, 91, 3, 4, 5])];
        assert_eq!(plan(&held, &new), p(0, 2, 2));
    }

    #[test]
    fn text_edited_before_an_image_re_evaluates_the_same_image() {
        let held = [T(&[1, 2, 3]), I(7), T(&[4])];
        let new = [T(&[1, 9, 3]), I(7), T(&[4, 5])];
        assert_eq!(plan(&held, &new), p(0, 1, 1));
    }

    #[test]
    fn a_different_image_in_the_same_place_cuts_before_it() {
        let held = [T(&[1, 2]), I(7), T(&[3])];
        let new = [T(&[1, 2]), I(8), T(&[3, 4])];
        assert_eq!(plan(&held, &new), p(1, 0, 2));
    }

    #[test]
    fn generated_tokens_after_the_prompt_are_reused_by_the_next_turn() {
        // The cache holds the last prompt plus the answer's tokens.
        let held = [T(&[1]), I(7), T(&[2, 3, 50, 51])];
        let new = [T(&[1]), I(7), T(&[2, 3, 50, 51, 4, 5])];
        assert_eq!(plan(&held, &new), p(2, 4, 8));
    }

    #[test]
    fn a_prompt_wholly_held_gives_back_its_last_token() {
        let held = [T(&[1]), I(7), T(&[2, 3, 4])];
        let new = [T(&[1]), I(7), T(&[2, 3])];
        assert_eq!(plan(&held, &new), p(2, 1, 5));
        let same = [T(&[1]), I(7), T(&[2, 3])];
        assert_eq!(plan(&same, &same), p(2, 1, 5));
    }

    #[test]
    fn a_prompt_ending_in_a_held_image_re_evaluates_that_image() {
        let held = [T(&[1]), I(7)];
        assert_eq!(plan(&held, &held), p(1, 0, 1));
    }

    #[test]
    fn a_held_image_where_the_new_prompt_has_text_cuts_there() {
        let held = [T(&[1, 2]), I(7), T(&[3])];
        let new = [T(&[1, 2, 3, 4])];
        assert_eq!(plan(&held, &new), p(0, 2, 2));
    }

    #[test]
    fn positions_and_cells_are_counted_apart_for_m_rope_images() {
        let mut held = Chunks::new();
        held.push_tokens(&[1, 2]);
        held.push_image(7, 64, 1);
        held.push_tokens(&[3]);
        let mut new = held.clone();
        new.push_tokens(&[4]);
        let plan = held.plan(&new);
        assert_eq!((plan.whole, plan.partial), (2, 1));
        assert_eq!((plan.positions, plan.tokens), (4, 67));
        assert_eq!((new.positions(), new.tokens()), (5, 68));
    }

    #[test]
    fn keep_leaves_the_shared_prefix_and_merges_text() {
        let held = chunks(&[T(&[1, 2]), I(7), T(&[3, 4, 5])]);
        let new = chunks(&[T(&[1, 2]), I(7), T(&[3, 9])]);
        let plan = held.plan(&new);
        let mut kept = held.clone();
        kept.keep(&new, &plan);
        assert_eq!(kept, chunks(&[T(&[1, 2]), I(7), T(&[3])]));
        assert_eq!(kept.positions(), plan.positions);
        kept.push_tokens(&[9]);
        assert_eq!(kept, new);
    }

    #[test]
    fn chunks_built_in_pieces_equal_chunks_built_at_once() {
        let mut a = Chunks::new();
        a.push_tokens(&[1]);
        a.push_tokens(&[]);
        a.push_tokens(&[2]);
        assert_eq!(a, chunks(&[T(&[1, 2])]));
        assert_eq!(a.text_only(), Some(vec![1, 2]));
        a.push_image(7, 3, 3);
        assert_eq!(a.text_only(), None);
    }
}
