"""One model, a prompt cache per chat (sequence) and the constraint; turns
run one at a time.

Each sequence's prompt cache holds the KV state of its `cached` tokens. A
turn trims it to the longest prefix its prompt shares with them and evaluates
only the rest (at least the last prompt token, whose logits start the answer).
A cache that cannot be trimmed (sliding-window layers) is instead restored
from the copy kept after the previous turn's prompt, so turn 2 evaluates only
what turn 1 added, not everything again.

`parallel` caches are always kept; past that, the least recently used
sequences' caches are dropped while they hold more than `kv_cache_mem` bytes
(that sequence's next turn evaluates its whole prompt and says so).
"""

from __future__ import annotations

import codecs
import copy
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional

import llguidance
import llguidance.hf
import mlx.core as mx
from mlx_lm import load
from mlx_lm.models.cache import (
    RotatingKVCache,
    can_trim_prompt_cache,
    make_prompt_cache,
    trim_prompt_cache,
)

from .constraint import Constraint
from .protocol import Channel

DEFAULT_CONTEXT_WINDOW = 32768
PREFILL_CHUNK = 512
WINDOW_KEYS = ("max_position_embeddings", "max_seq_len", "n_positions", "seq_length", "n_ctx")


class TurnError(Exception):
    """A turn that cannot run, with a kind the Rust side maps to an error."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def context_window(config: dict) -> tuple[int, str]:
    """The window the config names (also under `text_config`), else 32,768."""
    for scope in (config, config.get("text_config") or {}):
        for key in WINDOW_KEYS:
            value = scope.get(key)
            if isinstance(value, int) and value > 0:
                return value, key
    return DEFAULT_CONTEXT_WINDOW, "default"


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def nucleus(logits: mx.array, top_p: float) -> mx.array:
    """Top-p filtering: keep the likeliest tokens whose probabilities add up
    to `top_p` (at least the likeliest one), the rest become -inf. Masked
    tokens are -inf already and stay out."""
    probs = mx.softmax(logits, axis=-1)
    ordered = mx.sort(probs)[::-1]
    before = mx.cumsum(ordered) - ordered
    # A token is kept while the mass of the likelier ones is below top_p.
    kept = max(int(mx.sum(before < top_p).item()), 1)
    cutoff = ordered[kept - 1]
    return mx.where(probs >= cutoff, logits, -mx.inf)


class Sequence:
    """One chat's prompt cache, and the copy kept after its last prompt when
    the cache cannot be trimmed."""

    def __init__(self, cache: list) -> None:
        self.cache = cache
        self.cached: list[int] = []
        self.snapshot: Optional[tuple[list[int], list]] = None

    def nbytes(self) -> int:
        total = sum(c.nbytes for c in self.cache)
        if self.snapshot is not None:
            total += sum(c.nbytes for c in self.snapshot[1])
        return total


class Engine:
    def __init__(self, model_dir: Path, parallel: int = 4, kv_cache_mem: int = 2 << 30,
                 progress=lambda fraction: None) -> None:
        self.model_dir = model_dir
        self.parallel = max(1, parallel)
        self.kv_cache_mem = kv_cache_mem
        self.model, self.tokenizer, config = load(str(model_dir), return_config=True)
        progress(0.8)
        self.window, self.window_source = context_window(config)
        eos = sorted(self.tokenizer.eos_token_ids)
        hf = self.tokenizer._tokenizer
        n_vocab = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
        self.lltok = llguidance.hf.from_tokenizer(hf, n_vocab=n_vocab, eos_token=eos)
        self.eos = set(eos)
        self.constraint = Constraint(self.lltok, eos)
        self.model_type = config.get("model_type", "")
        # mlx-lm's max_kv_size: each chat keeps only its last N tokens (a
        # rotating cache, which cannot be trimmed once full).
        bound = os.environ.get("LRG_MLX_MAX_KV_SIZE", "").strip()
        self.max_kv_size = int(bound) if bound else None
        self.trimmable = self.max_kv_size is None and can_trim_prompt_cache(self._make_cache())
        self.seqs: "OrderedDict[int, Sequence]" = OrderedDict()
        # Sequences whose cache was dropped for memory; told on their next turn.
        self.dropped: set[int] = set()
        # The sequence of the running turn (what `_forward` extends).
        self.seq = self._new_sequence()
        progress(0.95)

    def info(self) -> dict[str, Any]:
        return {
            "name": self.model_dir.name,
            "model_type": self.model_type,
            "context_window": self.window,
            "context_window_source": self.window_source,
            "vocab_size": self.lltok.vocab_size,
            "trimmable_cache": self.trimmable,
            "parallel": self.parallel,
        }

    def render(self, messages: list[dict]) -> list[int]:
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        try:
            ids = self._template(msgs)
        except Exception:
            # Some templates (Gemma's) refuse a system role: fold it into the
            # first user message instead.
            if not msgs or msgs[0]["role"] != "system":
                raise
            system = msgs.pop(0)["content"]
            if msgs and msgs[0]["role"] == "user":
                msgs[0] = {"role": "user", "content": f"{system}\n\n{msgs[0]['content']}"}
            else:
                msgs.insert(0, {"role": "user", "content": system})
            ids = self._template(msgs)
        return [int(i) for i in ids]

    def _template(self, msgs: list[dict]) -> list[int]:
        # The answer has its own `analysis` field: no thinking block.
        return self.tokenizer.apply_chat_template(
            msgs, add_generation_prompt=True, tokenize=True, enable_thinking=False
        )

    def reset_cache(self) -> None:
        """Forget every sequence's cache."""
        self.seqs.clear()
        self.dropped.clear()
        self.seq = self._new_sequence()

    def release(self, sequence: int) -> None:
        """The chat is gone: free its cache."""
        self.seqs.pop(sequence, None)
        self.dropped.discard(sequence)

    def _sequence(self, sequence: int) -> tuple[Sequence, bool]:
        """The sequence's state (most recently used now), and whether a cache
        it had was dropped for memory."""
        dropped = sequence in self.dropped
        self.dropped.discard(sequence)
        seq = self.seqs.pop(sequence, None) or self._new_sequence()
        self.seqs[sequence] = seq
        return seq, dropped

    def _make_cache(self) -> list:
        if self.max_kv_size is None:
            return make_prompt_cache(self.model)
        # Models with a `make_cache` of their own ignore mlx-lm's max_kv_size.
        return [RotatingKVCache(max_size=self.max_kv_size, keep=4) for _ in self.model.layers]

    def _new_sequence(self) -> Sequence:
        return Sequence(self._make_cache())

    def _fit_memory(self) -> None:
        """Drop least recently used caches past `parallel` while they hold
        more than `kv_cache_mem` bytes."""
        total = sum(s.nbytes() for s in self.seqs.values())
        while len(self.seqs) > self.parallel and total > self.kv_cache_mem:
            sequence, seq = self.seqs.popitem(last=False)
            total -= seq.nbytes()
            self.dropped.add(sequence)

    def _forward(self, tokens: list[int]) -> mx.array:
        seq = self.seq
        logits = self.model(mx.array(tokens, dtype=mx.uint32)[None], cache=seq.cache)
        seq.cached.extend(tokens)
        return logits[0, -1, :]

    def _reuse(self, seq: Sequence, prompt: list[int]) -> tuple[int, int]:
        """Bring `seq`'s cache to the longest usable prefix of `prompt`:
        (tokens reused, of them restored from the snapshot)."""
        # Longest shared prefix, leaving at least one token to evaluate.
        reused = min(common_prefix(seq.cached, prompt), len(prompt) - 1)
        if reused == len(seq.cached):
            return reused, 0
        if can_trim_prompt_cache(seq.cache):
            trim_prompt_cache(seq.cache, len(seq.cached) - reused)
            del seq.cached[reused:]
            return reused, 0
        if seq.snapshot is not None:
            tokens, cache = seq.snapshot
            if len(tokens) <= len(prompt) - 1 and common_prefix(tokens, prompt) == len(tokens):
                # A copy: the turn extends it, the snapshot stays for the next.
                seq.cache = copy.deepcopy(cache)
                seq.cached = list(tokens)
                return len(tokens), len(tokens)
        seq.cache = self._make_cache()
        seq.cached = []
        return 0, 0

    def generate(self, req: dict, ch: Channel) -> None:
        rid = req["id"]
        started = time.perf_counter()
        try:
            messages = req["messages"]
            schema = req["schema"]
            max_tokens = int(req.get("max_tokens") or 0)
            temperature = float(req.get("temperature") or 0.0)
            top_p = req.get("top_p")
            top_p = None if top_p is None else float(top_p)
            seed = req.get("seed")
            sequence = int(req.get("sequence") or 0)
        except (KeyError, TypeError, ValueError) as e:
            raise TurnError("bad_request", f"malformed generate request: {e}") from e

        prompt = self.render(messages)
        if len(prompt) >= self.window:
            raise TurnError(
                "context_overflow",
                f"the prompt has {len(prompt)} tokens and the model's window is {self.window}",
            )
        budget = min(max_tokens, self.window - len(prompt))
        matcher, grammar_reused = None, False
        if schema is not None:
            try:
                matcher, grammar_reused = self.constraint.matcher_for(schema)
            except ValueError as e:
                raise TurnError("bad_request", str(e)) from e

        seq, dropped = self._sequence(sequence)
        self.seq = seq
        reused, restored = self._reuse(seq, prompt)

        ch.generated = 0
        stop = "done"
        logits: Optional[mx.array] = None
        for start in range(reused, len(prompt), PREFILL_CHUNK):
            if ch.cancelled_at(rid) is not None or ch.closed:
                stop = "cancelled"
                break
            logits = self._forward(prompt[start : start + PREFILL_CHUNK])
            mx.eval(logits)
            ch.send({"type": "progress", "id": rid, "evaluated": len(seq.cached) - reused,
                     "total": len(prompt) - reused})
        evaluated = len(seq.cached) - reused
        prefill_ms = (time.perf_counter() - started) * 1000
        if stop != "cancelled":
            if not can_trim_prompt_cache(seq.cache):
                # What turn 2 restores instead of evaluating everything again.
                seq.snapshot = (list(seq.cached), copy.deepcopy(seq.cache))
            ch.send({"type": "prefilled", "id": rid, "kept": reused - restored,
                     "restored": restored, "evaluated": evaluated, "dropped": dropped})

        key = mx.random.key(int(seed) if seed is not None else int(time.time_ns() % 2**31))
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        generated = 0
        first_token_ms = None
        while stop != "cancelled":
            if ch.cancelled_at(rid) is not None or ch.closed:
                stop = "cancelled"
                break
            if generated >= budget:
                stop = "max_tokens"
                break
            assert logits is not None
            if matcher is not None:
                masked = self.constraint.apply(matcher, logits)
            else:
                masked = self.constraint.apply_control(logits)
            if temperature <= 0:
                token = int(mx.argmax(masked).item())
            else:
                key, sub = mx.random.split(key)
                scaled = masked * (1.0 / temperature)
                if top_p is not None and top_p < 1.0:
                    scaled = nucleus(scaled, top_p)
                token = int(mx.random.categorical(scaled, key=sub).item())
            generated += 1
            ch.generated = generated
            if first_token_ms is None:
                first_token_ms = (time.perf_counter() - started) * 1000
            if token in self.eos:
                break
            if matcher is not None and not matcher.consume_token(token):
                raise TurnError("internal", f"constraint rejected token {token}: {matcher.get_error()}")
            text = utf8.decode(self.lltok.decode_bytes([token]))
            if text and ch.cancelled_at(rid) is None:
                ch.send({"type": "delta", "id": rid, "text": text})
            if matcher is not None and matcher.is_stopped():
                break
            logits = self._forward([token])
        tail = utf8.decode(b"", final=True)
        if tail and stop != "cancelled":
            ch.send({"type": "delta", "id": rid, "text": tail})

        at_cancel = ch.cancelled_at(rid)
        ch.forget(rid)
        ch.send({
            "type": "done",
            "id": rid,
            "stop": stop,
            "usage": {
                "prompt_tokens": len(prompt),
                "reused_tokens": reused,
                "evaluated_tokens": evaluated,
                "completion_tokens": generated,
                "after_cancel_tokens": max(0, generated - at_cancel) if at_cancel is not None else 0,
                "cached_tokens": len(seq.cached),
                "restored_tokens": restored,
            },
            "grammar_reused": grammar_reused,
            "timings": {
                "prefill_ms": round(prefill_ms, 3),
                "first_token_ms": None if first_token_ms is None else round(first_token_ms, 3),
                "total_ms": round((time.perf_counter() - started) * 1000, 3),
            },
        })
        self._fit_memory()
