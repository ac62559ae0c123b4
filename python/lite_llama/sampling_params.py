"""SamplingParams: how a request picks its tokens and when it stops (vLLM's names)."""
from __future__ import annotations

from dataclasses import dataclass
import json
from typing import Any, Dict, List, Optional, Union

from . import _core

_UINT64 = 1 << 64
# max_tokens=None: until the context ends (the engine stops there).
_UNTIL_CONTEXT = (1 << 31) - 1


def _float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def _int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


@dataclass
class SamplingParams:
    """Sampling parameters of one prompt, as vLLM's ``SamplingParams``.

    Args:
        n: completions to generate for the prompt; with a seed, completion ``i`` uses ``seed + i``.
        temperature: 0 is greedy (argmax).
        top_p: nucleus sampling, 1 = off.
        top_k: 0 (or -1) = off.
        min_p: 0 = off.
        seed: same seed, same prompt, same output. None: the LLM's ``seed`` (if any) picks one.
        max_tokens: new tokens at most (16 as vLLM); None = until the context ends.
        stop: stop string(s); the text ends right before the first one.
        stop_token_ids: token ids that end generation (kept in ``token_ids``).
        ignore_eos: keep generating past end-of-sequence tokens.
        logprobs: None = none; k = the chosen token's logprob plus the k best (k <= 20).
        presence_penalty, frequency_penalty: OpenAI style, over generated tokens, in [-2, 2].
        repetition_penalty: HF style, over prompt and generated tokens, 1 = off.
        logit_bias: token id -> bias added to its logit, in [-100, 100].
        json_schema: the output follows this JSON Schema (a dict or JSON text).
        regex: the output matches this regular expression.
        choice: the output is exactly one of these strings.
        grammar: the output follows this GBNF grammar (llama.cpp syntax, start rule ``root``).
          At most one of json_schema / regex / choice / grammar.

    Raises ValueError naming the first parameter out of range, at construction and again when used.
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: Optional[int] = None
    max_tokens: Optional[int] = 16
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None
    ignore_eos: bool = False
    logprobs: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: Optional[Dict[int, float]] = None
    json_schema: Optional[Union[Dict[str, Any], str]] = None
    regex: Optional[str] = None
    choice: Optional[List[str]] = None
    grammar: Optional[str] = None

    def __post_init__(self) -> None:
        self._to_core()

    @property
    def stop_strings(self) -> List[str]:
        """``stop`` as a list."""
        if self.stop is None:
            return []
        if isinstance(self.stop, str):
            return [self.stop]
        if not all(isinstance(s, str) for s in self.stop):
            raise ValueError(f"stop must be a string or a list of strings, got {self.stop!r}")
        return list(self.stop)

    def _to_core(self, seed: Optional[int] = None) -> _core.SamplingParams:
        """The engine's parameters for one completion, validated (ValueError)."""
        if _int("n", self.n) < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        p = _core.SamplingParams()
        p.temperature = _float("temperature", self.temperature)
        p.top_p = _float("top_p", self.top_p)
        top_k = _int("top_k", self.top_k)
        p.top_k = 0 if top_k == -1 else top_k
        p.min_p = _float("min_p", self.min_p)
        p.presence_penalty = _float("presence_penalty", self.presence_penalty)
        p.frequency_penalty = _float("frequency_penalty", self.frequency_penalty)
        p.repetition_penalty = _float("repetition_penalty", self.repetition_penalty)
        if self.max_tokens is None:
            p.max_tokens = _UNTIL_CONTEXT
        else:
            max_tokens = _int("max_tokens", self.max_tokens)
            if not 1 <= max_tokens <= _UNTIL_CONTEXT:
                raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
            p.max_tokens = max_tokens
        seed = self.seed if seed is None else seed
        if seed is not None:
            if _int("seed", seed) < 0:
                raise ValueError(f"seed must be >= 0, got {seed}")
            p.seed = int(seed) % _UINT64
        p.stop = self.stop_strings
        ids = [] if self.stop_token_ids is None else list(self.stop_token_ids)
        p.stop_token_ids = [_int("stop_token_ids", t) for t in ids]
        p.ignore_eos = bool(self.ignore_eos)
        if self.logprobs is not None:
            k = _int("logprobs", self.logprobs)
            if not 0 <= k <= 20:
                raise ValueError(f"logprobs must be in [0, 20], got {self.logprobs}")
            p.top_logprobs = k
        p.logit_bias = [(_int("logit_bias", t), _float("logit_bias", b))
                        for t, b in (self.logit_bias or {}).items()]
        p.grammar = self._grammar()
        p.validate()
        return p

    def _grammar(self) -> str:
        given = [k for k in ("json_schema", "regex", "choice", "grammar") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} both constrain the output; give one")
        if self.json_schema is not None:
            schema = self.json_schema if isinstance(self.json_schema, str) else json.dumps(self.json_schema)
            return _core.json_schema_grammar(schema)
        if self.regex is not None:
            return _core.regex_grammar(self.regex)
        if self.choice is not None:
            return _core.choice_grammar(list(self.choice))
        if self.grammar is not None:
            _core.check_grammar(self.grammar)
            return self.grammar
        return ""
