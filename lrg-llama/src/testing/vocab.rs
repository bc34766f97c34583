//! A synthetic BPE-like vocabulary of any size, for constraint benches that
//! need a realistic token trie without a model file.

use std::collections::HashSet;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};

/// Common English and code fragments, with and without a leading space, as
/// byte-level BPE vocabularies hold them.
const SEEDS: &[&str] = &[
    "the", "and", "ing", "tion", "er", "in", "re", "on", "at", "en", "es", "or", "is", "it",
    "file", "path", "read", "write", "search", "query", "config", "server", "timeout", "value",
    "\":\"", "\",\"", "{\"", "\"}", "\":{\"", "\"}}", "\\n", "\\\"", "://", "/", ".", ",", "=",
    "analysis", "call", "reply", "content", "user", "result", "error", "list", "json",
];

/// Builds a [`TokEnv`] over `n_vocab` tokens: the 256 single bytes, seed
/// fragments, then random lowercase/capitalized/space-prefixed/digit/
/// punctuation pieces of 2 to 12 bytes and some multi-byte characters,
/// deterministic for a given `seed`. The last id is the end-of-sequence token.
pub fn synthetic_tok_env(n_vocab: usize, seed: u64) -> TokEnv {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut words: Vec<Vec<u8>> = Vec::with_capacity(n_vocab);
    let mut add = |w: Vec<u8>, words: &mut Vec<Vec<u8>>| {
        if words.len() + 1 < n_vocab && seen.insert(w.clone()) {
            words.push(w);
        }
    };
    for b in 0..=255u8 {
        add(vec![b], &mut words);
    }
    for s in SEEDS {
        add(s.as_bytes().to_vec(), &mut words);
        add(format!(" {s}").into_bytes(), &mut words);
    }
    const LETTERS: &[u8] = b"etaoinshrdlcumwfgypbvkjxqz";
    const PUNCT: &[&str] = &[
        "\":", "\",", "()", "{}", "[]", "->", "::", "==", "!=", "</", "/>", "\n\n", "  ",
    ];
    const MULTI: &[&str] = &[
        "é", "ü", "ß", "ñ", "日", "本", "語", "→", "€", "中", "文", "😀",
    ];
    let mut stall = 0;
    while words.len() + 1 < n_vocab && stall < 1_000_000 {
        let before = words.len();
        let kind = rng.random_range(0..100);
        let w: Vec<u8> = if kind < 5 {
            PUNCT[rng.random_range(0..PUNCT.len())].as_bytes().to_vec()
        } else if kind < 10 {
            let n = rng.random_range(1..4);
            (0..n)
                .flat_map(|_| MULTI[rng.random_range(0..MULTI.len())].bytes())
                .collect()
        } else if kind < 18 {
            let n = rng.random_range(1..5);
            (0..n).map(|_| rng.random_range(b'0'..=b'9')).collect()
        } else {
            // Letters drawn with a skew toward frequent ones, like real merges.
            let len = rng.random_range(2..=12);
            let mut w: Vec<u8> = (0..len)
                .map(|_| {
                    let r: f64 = rng.random();
                    LETTERS[((r * r) * LETTERS.len() as f64) as usize]
                })
                .collect();
            if kind < 40 {
                w[0] = w[0].to_ascii_uppercase();
            }
            if kind % 2 == 0 {
                w.insert(0, b' ');
            }
            w
        };
        add(w, &mut words);
        stall = if words.len() == before { stall + 1 } else { 0 };
    }
    // Pad (only reachable for absurd sizes) so the vocabulary has exactly n_vocab ids.
    while words.len() + 1 < n_vocab {
        words.push(format!("<pad{}>", words.len()).into_bytes());
    }
    let eos = words.len() as u32;
    // 0xFF marks a special token in toktrie.
    words.push(b"\xFF</s>".to_vec());
    let info = TokRxInfo::new(words.len() as u32, eos);
    let trie = TokTrie::from(&info, &words);
    Arc::new(ApproximateTokEnv::new(trie))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_the_requested_size_and_eos_last() {
        let env = synthetic_tok_env(5000, 1);
        assert_eq!(env.tok_trie().vocab_size(), 5000);
        assert_eq!(env.tok_trie().eos_token(), 4999);
        // every byte is reachable, so any text can be tokenized
        let toks = env.tokenize_bytes("héllo 😀".as_bytes());
        assert_eq!(env.tok_trie().decode(&toks), "héllo 😀".as_bytes());
    }
}
