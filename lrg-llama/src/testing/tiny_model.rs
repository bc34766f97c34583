//! A tiny random-weight llama model, written as GGUF, for offline tests.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::gguf::{GgufFile, Value};

/// The chatml chat template (Jinja), as Qwen-style models ship it; llama.cpp
/// recognizes it by its `<|im_start|>` marker and applies its built-in chatml.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// Shape of the tiny model. The defaults are small enough for a test to load
/// and run it in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct TinyModelSpec {
    /// Seed of the weights.
    pub seed: u64,
    /// Embedding width.
    pub n_embd: u32,
    /// Attention heads.
    pub n_head: u32,
    /// Key/value heads (grouped-query attention when below `n_head`).
    pub n_head_kv: u32,
    /// Feed-forward width.
    pub n_ff: u32,
    /// Transformer blocks.
    pub n_layer: u32,
    /// Training context length written into the metadata.
    pub n_ctx_train: u32,
}

impl Default for TinyModelSpec {
    fn default() -> Self {
        Self {
            seed: 7,
            n_embd: 64,
            n_head: 4,
            n_head_kv: 2,
            n_ff: 128,
            n_layer: 2,
            n_ctx_train: 8192,
        }
    }
}

// SentencePiece token types as llama.cpp reads them.
const TYPE_NORMAL: i32 = 1;
const TYPE_UNKNOWN: i32 = 2;
const TYPE_CONTROL: i32 = 3;
const TYPE_BYTE: i32 = 6;

/// SentencePiece's visible space.
const SPACE: char = '\u{2581}';

/// Words whose every prefix becomes a token, so SentencePiece's pairwise
/// merges can reach the whole word.
const WORDS: &[&str] = &[
    "analysis",
    "call",
    "reply",
    "path",
    "file",
    "read",
    "write",
    "search",
    "query",
    "content",
    "directory",
    "list",
    "the",
    "and",
    "that",
    "with",
    "tool",
    "user",
    "result",
    "error",
    "name",
    "arguments",
    "command",
    "true",
    "false",
    "null",
    "hello",
    "world",
    "json",
    "text",
];

/// Multi-byte characters given their own token; others fall back to bytes.
const CHARS: &[&str] = &["é", "ü", "ß", "ñ", "日", "本", "→", "€", "😀"];

/// Common pieces of JSON answers.
const JSON_PIECES: &[&str] = &[
    "{\"", "\":\"", "\",\"", "\"}", "\":{\"", "\"}}", "\":", "},", "\":[", "\\n", "\\\"",
];

/// The tokens, scores and types of the tiny vocabulary.
struct Vocab {
    tokens: Vec<String>,
    scores: Vec<f32>,
    types: Vec<i32>,
}

impl Vocab {
    fn push(&mut self, text: String, score: f32, ty: i32) {
        if !self.tokens.contains(&text) {
            self.tokens.push(text);
            self.scores.push(score);
            self.types.push(ty);
        }
    }
}

/// Ids of the special tokens, fixed by [`build_vocab`].
const UNK_ID: u32 = 0;
const BOS_ID: u32 = 1;
const EOS_ID: u32 = 2;
const IM_END_ID: u32 = 260;

fn build_vocab() -> Vocab {
    let mut v = Vocab {
        tokens: Vec::new(),
        scores: Vec::new(),
        types: Vec::new(),
    };
    v.push("<unk>".into(), 0.0, TYPE_UNKNOWN);
    v.push("<s>".into(), 0.0, TYPE_CONTROL);
    v.push("</s>".into(), 0.0, TYPE_CONTROL);
    for b in 0..=255u8 {
        v.push(format!("<0x{b:02X}>"), 0.0, TYPE_BYTE);
    }
    v.push("<|im_start|>".into(), 0.0, TYPE_CONTROL);
    v.push("<|im_end|>".into(), 0.0, TYPE_CONTROL);
    v.push(SPACE.to_string(), -1.0, TYPE_NORMAL);
    for c in 0x21u8..=0x7E {
        v.push((c as char).to_string(), -1.0, TYPE_NORMAL);
    }
    for c in CHARS {
        v.push((*c).to_string(), -1.0, TYPE_NORMAL);
    }
    // Longer pieces score higher so the tokenizer prefers them.
    let mut add_prefixes = |word: &str| {
        let chars: Vec<char> = word.chars().collect();
        for n in 2..=chars.len() {
            let piece: String = chars[..n].iter().collect();
            v.push(piece, n as f32, TYPE_NORMAL);
        }
    };
    for w in WORDS {
        add_prefixes(w);
        add_prefixes(&format!("{SPACE}{w}"));
    }
    for p in JSON_PIECES {
        add_prefixes(p);
    }
    v
}

/// Writes the tiny model to `path`: llama architecture, random F32 weights
/// from `spec.seed`, a SentencePiece byte-fallback vocabulary of about 800
/// tokens with `<|im_start|>`/`<|im_end|>`, and the chatml template.
///
/// # Errors
/// When the file cannot be written.
pub fn write_tiny_model(path: &Path, spec: &TinyModelSpec) -> std::io::Result<()> {
    let vocab = build_vocab();
    let n_vocab = vocab.tokens.len() as u64;
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut f = GgufFile::default();

    f.kv("general.architecture", Value::Str("llama".into()));
    f.kv("general.name", Value::Str("lrg-tiny".into()));
    f.kv("general.alignment", Value::U32(32));
    f.kv("llama.context_length", Value::U32(spec.n_ctx_train));
    f.kv("llama.embedding_length", Value::U32(spec.n_embd));
    f.kv("llama.block_count", Value::U32(spec.n_layer));
    f.kv("llama.feed_forward_length", Value::U32(spec.n_ff));
    f.kv("llama.attention.head_count", Value::U32(spec.n_head));
    f.kv("llama.attention.head_count_kv", Value::U32(spec.n_head_kv));
    f.kv("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5));
    f.kv(
        "llama.rope.dimension_count",
        Value::U32(spec.n_embd / spec.n_head),
    );
    f.kv("llama.rope.freq_base", Value::F32(10_000.0));
    f.kv("tokenizer.ggml.model", Value::Str("llama".into()));
    f.kv("tokenizer.ggml.tokens", Value::StrArray(vocab.tokens));
    f.kv("tokenizer.ggml.scores", Value::F32Array(vocab.scores));
    f.kv("tokenizer.ggml.token_type", Value::I32Array(vocab.types));
    f.kv("tokenizer.ggml.unknown_token_id", Value::U32(UNK_ID));
    f.kv("tokenizer.ggml.bos_token_id", Value::U32(BOS_ID));
    // chatml ends a turn with <|im_end|>; making it EOS is what chatml models do.
    f.kv("tokenizer.ggml.eos_token_id", Value::U32(IM_END_ID));
    f.kv("tokenizer.ggml.padding_token_id", Value::U32(EOS_ID));
    f.kv("tokenizer.ggml.add_bos_token", Value::Bool(false));
    f.kv("tokenizer.ggml.add_space_prefix", Value::Bool(false));
    f.kv(
        "tokenizer.chat_template",
        Value::Str(CHATML_TEMPLATE.into()),
    );

    let embd = u64::from(spec.n_embd);
    let ff = u64::from(spec.n_ff);
    let head_dim = embd / u64::from(spec.n_head);
    let kv = head_dim * u64::from(spec.n_head_kv);
    let mut random = |shape: &[u64], scale: f32| -> Vec<f32> {
        let n: u64 = shape.iter().product();
        (0..n).map(|_| rng.random_range(-scale..scale)).collect()
    };
    f.tensor(
        "token_embd.weight",
        &[embd, n_vocab],
        random(&[embd, n_vocab], 1.0),
    );
    f.tensor("output_norm.weight", &[embd], vec![1.0; embd as usize]);
    f.tensor(
        "output.weight",
        &[embd, n_vocab],
        random(&[embd, n_vocab], 0.5),
    );
    for i in 0..spec.n_layer {
        let p = format!("blk.{i}");
        f.tensor(
            format!("{p}.attn_norm.weight"),
            &[embd],
            vec![1.0; embd as usize],
        );
        f.tensor(
            format!("{p}.attn_q.weight"),
            &[embd, embd],
            random(&[embd, embd], 0.2),
        );
        f.tensor(
            format!("{p}.attn_k.weight"),
            &[embd, kv],
            random(&[embd, kv], 0.2),
        );
        f.tensor(
            format!("{p}.attn_v.weight"),
            &[embd, kv],
            random(&[embd, kv], 0.2),
        );
        f.tensor(
            format!("{p}.attn_output.weight"),
            &[embd, embd],
            random(&[embd, embd], 0.2),
        );
        f.tensor(
            format!("{p}.ffn_norm.weight"),
            &[embd],
            vec![1.0; embd as usize],
        );
        f.tensor(
            format!("{p}.ffn_gate.weight"),
            &[embd, ff],
            random(&[embd, ff], 0.2),
        );
        f.tensor(
            format!("{p}.ffn_up.weight"),
            &[embd, ff],
            random(&[embd, ff], 0.2),
        );
        f.tensor(
            format!("{p}.ffn_down.weight"),
            &[ff, embd],
            random(&[ff, embd], 0.2),
        );
    }

    let mut out = BufWriter::new(File::create(path)?);
    f.write(&mut out)?;
    std::io::Write::flush(&mut out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_ids_match_the_vocab() {
        let v = build_vocab();
        assert_eq!(v.tokens[UNK_ID as usize], "<unk>");
        assert_eq!(v.tokens[BOS_ID as usize], "<s>");
        assert_eq!(v.tokens[EOS_ID as usize], "</s>");
        assert_eq!(v.tokens[IM_END_ID as usize], "<|im_end|>");
        assert_eq!(v.tokens[3 + 0x41], "<0x41>");
        assert_eq!(v.tokens.len(), v.scores.len());
        assert_eq!(v.tokens.len(), v.types.len());
    }
}
