"""One model, its prompt cache and its constraint; turns run one at a time.

The prompt cache holds the KV state of `cached` tokens. A turn trims it to the
longest prefix its prompt shares with them and evaluates only the rest (at
least the last prompt token, whose logits start the answer).
"""

from __future__ import annotations

import codecs
import time
from pathlib import Path
from typing import Any, Optional

import llguidance
import llguidance.hf
import mlx.core as mx
from mlx_lm import load
from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

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


class Engine:
    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        self.model, self.tokenizer, config = load(str(model_dir), return_config=True)
        self.window, self.window_source = context_window(config)
        eos = sorted(self.tokenizer.eos_token_ids)
        hf = self.tokenizer._tokenizer
        n_vocab = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
        self.lltok = llguidance.hf.from_tokenizer(hf, n_vocab=n_vocab, eos_token=eos)
        self.eos = set(eos)
        self.constraint = Constraint(self.lltok, eos)
        self.model_type = config.get("model_type", "")
        self.cache = make_prompt_cache(self.model)
        self.cached: list[int] = []

    def info(self) -> dict[str, Any]:
        return {
            "name": self.model_dir.name,
            "model_type": self.model_type,
            "context_window": self.window,
            "context_window_source": self.window_source,
            "vocab_size": self.lltok.vocab_size,
            "trimmable_cache": can_trim_prompt_cache(self.cache),
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
        self.cache = make_prompt_cache(self.model)
        self.cached = []

    def _forward(self, tokens: list[int]) -> mx.array:
        logits = self.model(mx.array(tokens, dtype=mx.uint32)[None], cache=self.cache)
        self.cached.extend(tokens)
        return logits[0, -1, :]

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

        # Longest shared prefix, leaving at least one token to evaluate.
        reused = min(common_prefix(self.cached, prompt), len(prompt) - 1)
        if reused < len(self.cached):
            if can_trim_prompt_cache(self.cache):
                trim_prompt_cache(self.cache, len(self.cached) - reused)
                del self.cached[reused:]
            else:
                self.reset_cache()
                reused = 0

        ch.generated = 0
        stop = "done"
        logits: Optional[mx.array] = None
        for start in range(reused, len(prompt), PREFILL_CHUNK):
            if ch.cancelled_at(rid) is not None or ch.closed:
                stop = "cancelled"
                break
            logits = self._forward(prompt[start : start + PREFILL_CHUNK])
            mx.eval(logits)
            ch.send({"type": "progress", "id": rid, "evaluated": len(self.cached) - reused,
                     "total": len(prompt) - reused})
        evaluated = len(self.cached) - reused
        prefill_ms = (time.perf_counter() - started) * 1000

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
                "cached_tokens": len(self.cached),
            },
            "grammar_reused": grammar_reused,
            "timings": {
                "prefill_ms": round(prefill_ms, 3),
                "first_token_ms": None if first_token_ms is None else round(first_token_ms, 3),
                "total_ms": round((time.perf_counter() - started) * 1000, 3),
            },
        })
