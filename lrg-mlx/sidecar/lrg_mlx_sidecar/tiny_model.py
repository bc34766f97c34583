"""Writes a tiny random-weight model that mlx-lm loads: a 2-layer llama in
safetensors, a byte-level BPE tokenizer.json, config.json and a ChatML chat
template. About 0.5 MB, deterministic for a seed, built offline with only
numpy and tokenizers (no download, no mlx needed to write it).

    python -m lrg_mlx_sidecar.tiny_model OUT_DIR [--seed N] [--context-window N]

The answers such a model gives are gibberish; what tests check is that the
engine around it (constraint, cache, cancel, protocol) still behaves.
"""

from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path

import numpy as np

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Control tokens: end of text, the ChatML markers, and one that imitates the
# channel markers some models leak into their answers.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|channel|>"]

# Text the tokenizer's merges are learned from: the answer format's keys and
# punctuation, tool names, and some prose, so common pieces get one token.
CORPUS = [
    '{"analysis":"","call":{"read_file":{"path":"/etc/hosts"}}}',
    '{"analysis":"The user wants a file.","reply":"Here it is."}',
    '{"analysis":"I list the directory first.","call":{"list_directory":{"path":"/tmp"}}}',
    "read_file write_file list_directory search_files run_command fetch_url",
    "create_issue send_email path content pattern command url title body labels",
    "Result of echo: {\"text\":\"hello\"} Result of add: {\"sum\":5}",
    "You are a careful assistant. Answer with a tool call or a reply.",
    "The quick brown fox jumps over the lazy dog. Please read the file and tell me.",
    "system user assistant tool analysis reply call arguments",
    "café naïve ñandú 日本語 中文 → € 😀 0123456789 true false null",
]


def build_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    return tok


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """The safetensors format by hand (a JSON header, then raw little-endian
    data), so writing the fixture needs no extra package."""
    header = {}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def write_tiny_model(
    out: Path,
    seed: int = 0,
    vocab_size: int = 640,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int = 128,
    context_window: int | None = None,
    quote_bias: float = 0.0,
) -> Path:
    """Writes the model into `out` (created if needed) and returns it.
    Without `context_window` the config names none, as some models do.

    `quote_bias` > 0 makes the model favour the `"` token wherever the grammar
    allows it, so strings end early and answers stay short (end-to-end runs
    stay fast); everything else stays random. How: one residual dimension is a
    constant in every embedding, and the untied output head reads it only for
    `"`, which amounts to a logit bias."""
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(vocab_size)
    tok.save(str(out / "tokenizer.json"))
    n_vocab = tok.get_vocab_size()
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}

    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "intermediate_size": intermediate,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-5,
        "vocab_size": n_vocab,
        "rope_theta": 10000.0,
        "tie_word_embeddings": quote_bias == 0.0,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
    }
    if context_window is not None:
        config["max_position_embeddings"] = context_window
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": None,
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "unk_token": None,
                "chat_template": CHATML_TEMPLATE,
                "model_max_length": context_window or 32768,
            },
            indent=2,
        )
    )

    rng = np.random.default_rng(seed)
    head_dim = hidden // heads

    def w(*shape: int, scale: float = 0.08) -> np.ndarray:
        return rng.normal(0.0, scale, size=shape).astype(np.float32)

    t: dict[str, np.ndarray] = {"model.embed_tokens.weight": w(n_vocab, hidden, scale=0.5)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = w(heads * head_dim, hidden)
        t[p + "self_attn.k_proj.weight"] = w(kv_heads * head_dim, hidden)
        t[p + "self_attn.v_proj.weight"] = w(kv_heads * head_dim, hidden)
        t[p + "self_attn.o_proj.weight"] = w(hidden, heads * head_dim)
        t[p + "mlp.gate_proj.weight"] = w(intermediate, hidden)
        t[p + "mlp.up_proj.weight"] = w(intermediate, hidden)
        t[p + "mlp.down_proj.weight"] = w(hidden, intermediate)
        t[p + "input_layernorm.weight"] = np.ones(hidden, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(hidden, np.float32)
    t["model.norm.weight"] = np.ones(hidden, np.float32)
    if quote_bias:
        t["model.embed_tokens.weight"][:, 0] = 1.5
        head = w(n_vocab, hidden, scale=0.5)
        head[:, 0] = 0.0
        head[tok.token_to_id('"'), 0] = quote_bias
        t["lm_head.weight"] = head
    write_safetensors(out / "model.safetensors", t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--context-window", type=int, default=None)
    ap.add_argument("--quote-bias", type=float, default=0.0)
    a = ap.parse_args()
    write_tiny_model(a.out, seed=a.seed, context_window=a.context_window, quote_bias=a.quote_bias)
    print(a.out)


if __name__ == "__main__":
    main()
