"""Writes a tiny random-weight model that mlx-lm loads: a 2-layer llama in
safetensors, a byte-level BPE tokenizer.json, config.json and a ChatML chat
template. About 0.5 MB, deterministic for a seed, built offline with only
numpy and tokenizers (no download, no mlx needed to write it).

    python -m lrg_mlx_sidecar.tiny_model OUT_DIR [--seed N] [--context-window N]

The answers such a model gives are gibberish; what tests check is that the
engine around it (constraint, cache, cancel, protocol) still behaves.

With `--tool-habit` the model is random too, plus a few crafted circuits
that give it one habit, the way a real model is trained to use tools: it
calls a tool first (a `list…` tool when there is one), and after a tool
result it replies. Greedy, a conversation goes call, result, reply (see
`craft_tool_habit`).
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


# The start of a tool result as lrg renders it (a user message that begins
# "Result of <tool>:"), through the ChatML template. The tool-habit model's
# tokenizer has one token for it, as real models have one that opens a tool
# response, and its crafted attention head looks for that token.
RESULT_MARKER = "user\nResult of"

# What the tool-habit model writes into every free string (its analysis and
# its reply): a few tokens, each predicted from the one before.
HABIT_TEXT = ["Here", " it", " is", "."]


def build_tokenizer(vocab_size: int, result_marker: bool = False):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

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
    if result_marker:
        tok.add_tokens([AddedToken(RESULT_MARKER, normalized=False)])
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
    tool_habit: bool = False,
) -> Path:
    """Writes the model into `out` (created if needed) and returns it.
    Without `context_window` the config names none, as some models do.

    `quote_bias` > 0 makes the model favour the `"` token wherever the grammar
    allows it, so strings end early and answers stay short (end-to-end runs
    stay fast); everything else stays random. How: one residual dimension is a
    constant in every embedding, and the untied output head reads it only for
    `"`, which amounts to a logit bias.

    `tool_habit` adds the circuits of `craft_tool_habit` (call first, reply
    after a result) and the tokenizer's tool-result token; its output head
    replaces the one `quote_bias` would write."""
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(vocab_size, result_marker=tool_habit)
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
        # The habit's attention head must see a result thousands of tokens
        # back: slow rotary frequencies keep its score from turning with distance.
        "rope_theta": 1e6 if tool_habit else 10000.0,
        "tie_word_embeddings": quote_bias == 0.0 and not tool_habit,
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
    if tool_habit:
        t["lm_head.weight"] = w(n_vocab, hidden, scale=HABIT_NOISE)
        craft_tool_habit(t, tok, heads=heads, kv_heads=kv_heads, layers=layers)
    write_safetensors(out / "model.safetensors", t)
    return out


# Residual dimensions the habit owns; the random weights neither read nor
# write them, so what the circuits put there arrives intact at the output.
CONST, MARKER, SEEN, AFTER_QUOTE = 0, 1, 2, 3
AFTER_TEXT = 4  # 4.. : one per HABIT_TEXT token, "the token just read was this one"
OWNED = AFTER_TEXT + len(HABIT_TEXT)
# Scale of the random output head: its logits stay small beside the habit's.
HABIT_NOISE = 0.1
# Logits (before the final norm) of the habit's choices.
CHOOSE = 12.0  # call vs reply
CHAIN = 20.0  # the next token of HABIT_TEXT, then the closing quote
PREFER = 6.0  # `":"` (a string opens right after a key) and a `list` tool


def craft_tool_habit(t: dict, tok, heads: int, kv_heads: int, layers: int) -> None:
    """Gives the random model in `t` one habit, with circuits in residual
    dimensions of its own (the random weights are cleared from them):

    - seen a result: the embedding of the tool-result token (`RESULT_MARKER`)
      sets MARKER; a layer-0 attention head whose query is constant and whose
      key is MARKER attends only to such tokens (score ~30, every other key
      is 0) and copies MARKER into SEEN. With no result in the conversation
      every value it averages is 0, so SEEN is exactly 0.
    - call or reply: the output head gives the `call` key +CHOOSE and the
      `reply` key -CHOOSE while SEEN is 0, and the other way round once it is
      set. The grammar allows a key only where the answer chooses its form.
    - short strings: tokens that end in `"` set AFTER_QUOTE, and each
      HABIT_TEXT token its own dimension; the output head reads them as a
      bigram chain: after a `"` comes "Here", then " it", " is", ".", then
      the closing `"`. So every free string is "Here it is.".
    - `":"` and `list` are preferred, so keys open their string values at
      once and a `list…` tool is the one called.
    """
    emb = t["model.embed_tokens.weight"]
    head = t["lm_head.weight"]
    n_vocab, hidden = emb.shape
    head_dim = hidden // heads
    for i in range(layers):
        p = f"model.layers.{i}."
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                     "mlp.gate_proj", "mlp.up_proj"):
            t[p + name + ".weight"][:, :OWNED] = 0.0
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            t[p + name + ".weight"][:OWNED, :] = 0.0
    emb[:, :OWNED] = 0.0
    head[:, :OWNED] = 0.0

    def token(text: str) -> int:
        ids = tok.encode(text, add_special_tokens=False).ids
        if len(ids) != 1:
            raise ValueError(f"the tiny tokenizer splits {text!r} into {len(ids)} tokens")
        return ids[0]

    const = 1.5
    emb[:, CONST] = const
    emb[token(RESULT_MARKER), MARKER] = 4.0
    for i in range(n_vocab):
        if tok.decode([i], skip_special_tokens=False).endswith('"'):
            emb[i, AFTER_QUOTE] = 3.0
    chain = [token(text) for text in HABIT_TEXT]
    for k, i in enumerate(chain):
        emb[i, AFTER_TEXT + k] = 3.0

    # Layer 0, last head: query from CONST, key from MARKER, both on the
    # head's slowest rotary pair (dimension head_dim/2 - 1), value MARKER.
    h = heads - 1
    kv = h // (heads // kv_heads)
    slow = head_dim // 2 - 1
    p = "model.layers.0.self_attn."
    wq, wk, wv, wo = (t[p + n + ".weight"] for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
    wq[h * head_dim:(h + 1) * head_dim, :] = 0.0
    wk[kv * head_dim:(kv + 1) * head_dim, :] = 0.0
    wv[kv * head_dim:(kv + 1) * head_dim, :] = 0.0
    wo[:, h * head_dim:(h + 1) * head_dim] = 0.0
    wq[h * head_dim + slow, CONST] = 3.0
    wk[kv * head_dim + slow, MARKER] = 3.0
    wv[kv * head_dim, MARKER] = 1.0
    wo[SEEN, h * head_dim] = 0.5

    # The output head. SEEN is about 2.8 after a result (the normed MARKER,
    # about 5.6, times 0.5); CONST is 1.5. Estimates with wide margins: the
    # tests check the outcome, on several seeds when this changes.
    seen = 2.8
    call, reply = token("call"), token("reply")
    head[call, CONST] = CHOOSE / const
    head[call, SEEN] = -2 * CHOOSE / seen
    head[reply, CONST] = -CHOOSE / const
    head[reply, SEEN] = 2 * CHOOSE / seen
    # Each link: "the token just read" (an embedding value of 3) -> the next.
    follows = [(AFTER_QUOTE, chain[0])]
    follows += [(AFTER_TEXT + k, nxt) for k, nxt in enumerate(chain[1:])]
    follows.append((AFTER_TEXT + len(chain) - 1, token('"')))
    for dim, nxt in follows:
        head[nxt, dim] = CHAIN / 3.0
    head[token('":"'), CONST] = PREFER / const
    head[token("list"), CONST] = PREFER / const


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--context-window", type=int, default=None)
    ap.add_argument("--quote-bias", type=float, default=0.0)
    ap.add_argument("--tool-habit", action="store_true",
                    help="call a tool first, reply after a tool result (greedy)")
    a = ap.parse_args()
    write_tiny_model(a.out, seed=a.seed, context_window=a.context_window,
                     quote_bias=a.quote_bias, tool_habit=a.tool_habit)
    print(a.out)


if __name__ == "__main__":
    main()
