"""The answer constraint: llguidance's matcher over the model's tokenizer.

The compiled grammar is kept while the schema repeats (each turn starts from a
copy of it). The mask is applied with llguidance's Metal kernel when Metal is
there, else on the CPU (numpy unpacks the bitmask, `mx.where` applies it);
both give the same logits. Control tokens other than the end-of-sequence ones
are cleared from every mask, so none can reach an answer.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional

import llguidance
import llguidance.numpy as llnp
import mlx.core as mx
import numpy as np


class SchemaError(ValueError):
    """The schema cannot be compiled into a grammar."""


def _bits(ids: Iterable[int], words: int) -> np.ndarray:
    b = np.zeros(words, dtype=np.uint32)
    for i in ids:
        if 0 <= i < words * 32:
            b[i // 32] |= np.uint32(1 << (i % 32))
    return b.view(np.int32)


class Constraint:
    def __init__(self, tokenizer: llguidance.LLTokenizer, eos_ids: list[int]) -> None:
        self.tokenizer = tokenizer
        self.vocab = tokenizer.vocab_size
        self.bitmask = llnp.allocate_token_bitmask(1, self.vocab)
        words = self.bitmask.shape[1]
        control = [i for i in range(self.vocab) if tokenizer.is_special_token(i)]
        self._control = _bits(list(control) + eos_ids, words)
        self._eos = _bits(eos_ids, words)
        self._key: Optional[str] = None
        self._template: Optional[llguidance.LLMatcher] = None
        self._metal = mx.metal.is_available()

    def matcher_for(self, schema: Any) -> tuple[llguidance.LLMatcher, bool]:
        """A fresh matcher for `schema`, and whether the compiled grammar was
        reused from the previous turn."""
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        if key == self._key and self._template is not None:
            return self._template.deep_copy(), True
        if not isinstance(schema, dict):
            raise SchemaError("the answer schema must be a JSON object")
        # No whitespace outside strings: the answer is compact JSON, as with
        # the llama.cpp engine.
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            schema, overrides={"whitespace_flexible": False}
        )
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(
            grammar, self.tokenizer
        )
        if is_error:
            raise SchemaError(f"the answer schema cannot be enforced: {messages[0]}")
        template = llguidance.LLMatcher(self.tokenizer, grammar, log_level=0)
        if template.is_error():
            raise SchemaError(f"the answer schema cannot be enforced: {template.get_error()}")
        self._key, self._template = key, template
        return template.deep_copy(), False

    def apply(self, matcher: llguidance.LLMatcher, logits: mx.array) -> mx.array:
        """`logits` (1-D) with every token the grammar forbids at -inf."""
        llnp.fill_next_token_bitmask(matcher, self.bitmask)
        if matcher.is_error():
            raise RuntimeError(f"constraint error: {matcher.get_error()}")
        return self._masked(logits)

    def apply_control(self, logits: mx.array) -> mx.array:
        """Unconstrained (benches): only the control tokens are forbidden."""
        self.bitmask.fill(-1)
        return self._masked(logits)

    def _masked(self, logits: mx.array) -> mx.array:
        mask = self.bitmask[0]
        eos_allowed = mask & self._eos
        mask &= ~self._control
        mask |= eos_allowed
        if self._metal:
            from llguidance.mlx import apply_token_bitmask

            return apply_token_bitmask(logits[None], self.bitmask)[0]
        allowed = np.unpackbits(mask.view(np.uint8), bitorder="little")
        n = logits.shape[-1]
        if allowed.shape[0] < n:
            allowed = np.concatenate([allowed, np.zeros(n - allowed.shape[0], np.uint8)])
        return mx.where(mx.array(allowed[:n].astype(np.bool_)), logits, -mx.inf)
