"""SamplingParams: how a request picks its tokens and when it stops (vLLM's names)."""
from __future__ import annotations

import copy
from dataclasses import dataclass
import json
from typing import Any, Dict, List, Optional, Union

from . import _checks, _core

# max_tokens=None: until the context ends (the engine stops there).
_UNTIL_CONTEXT = _checks.INT32_MAX


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
        prompt_logprobs: None = none; k = per prompt token (None for the first) its logprob and
          rank plus the k best at its position (k <= 20), in ``RequestOutput.prompt_logprobs``.
        presence_penalty, frequency_penalty: OpenAI style, over generated tokens, in [-2, 2].
        repetition_penalty: HF style, over prompt and generated tokens, 1 = off.
        logit_bias: token id -> bias added to its logit, in [-100, 100].
        json_schema: the output follows this JSON Schema (a dict or JSON text).
        regex: the output matches this regular expression.
        choice: the output is exactly one of these strings.
        grammar: the output follows this GBNF grammar (llama.cpp syntax, start rule ``root``).
          At most one of json_schema / regex / choice / grammar.
        min_tokens: no end-of-sequence token or stop token id within this many new tokens, and no
          stop string ending within them (vLLM's ``min_tokens``), at most ``max_tokens``; a
          grammar (json_schema, ...) that is complete ends the output anyway.
        include_stop_str_in_output: the text ends with the stop string it met (vLLM's).
        skip_special_tokens: control tokens (``<|im_end|>``) add no text; False keeps them (vLLM's).
        allowed_token_ids: only these token ids may be generated (vLLM's); not empty.
        bad_words: strings never generated (vLLM's): a word's last token is banned wherever its
          other tokens end the output so far; each word is tokenized as is and with a leading space.

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
    prompt_logprobs: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: Optional[Dict[int, float]] = None
    json_schema: Optional[Union[Dict[str, Any], str]] = None
    regex: Optional[str] = None
    choice: Optional[List[str]] = None
    grammar: Optional[str] = None
    min_tokens: int = 0
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    allowed_token_ids: Optional[List[int]] = None
    bad_words: Optional[List[str]] = None

    def __post_init__(self) -> None:
        self._to_core()

    def clone(self) -> "SamplingParams":
        """A deep copy (vLLM's)."""
        return copy.deepcopy(self)

    @property
    def stop_strings(self) -> List[str]:
        """``stop`` as a list."""
        return [] if self.stop is None else _checks.text_or_texts("stop", self.stop)

    def _to_core(self, seed: Optional[int] = None, vocab_size: Optional[int] = None) -> _core.SamplingParams:
        """The engine's parameters for one completion, validated (ValueError). ``vocab_size``
        (when known: at generate time) bounds ``stop_token_ids``."""
        _checks.integer("n", self.n, 1, _checks.INT32_MAX, whole_floats=True)
        p = _core.SamplingParams()
        p.temperature = _checks.number("temperature", self.temperature)
        p.top_p = _checks.number("top_p", self.top_p)
        top_k = _checks.integer("top_k", self.top_k, -1, _checks.INT32_MAX, whole_floats=True)
        p.top_k = 0 if top_k == -1 else top_k
        p.min_p = _checks.number("min_p", self.min_p)
        p.presence_penalty = _checks.number("presence_penalty", self.presence_penalty)
        p.frequency_penalty = _checks.number("frequency_penalty", self.frequency_penalty)
        p.repetition_penalty = _checks.number("repetition_penalty", self.repetition_penalty)
        if self.max_tokens is None:
            p.max_tokens = _UNTIL_CONTEXT
        else:
            p.max_tokens = _checks.integer("max_tokens", self.max_tokens, 1, _UNTIL_CONTEXT,
                                           whole_floats=True)
        p.min_tokens = _checks.integer("min_tokens", self.min_tokens, 0, _UNTIL_CONTEXT, whole_floats=True)
        seed = self.seed if seed is None else seed
        if seed is not None:
            # The given seed is 64-bit; choice i's seed + i wraps, as on the server.
            if self.seed is not None:
                _checks.integer("seed", self.seed, 0, _checks.UINT64_MAX, whole_floats=True)
            p.seed = _checks.integer("seed", seed, 0, whole_floats=True) % (_checks.UINT64_MAX + 1)
        p.stop = self.stop_strings
        if self.stop_token_ids is not None:
            p.stop_token_ids = _checks.token_ids("stop_token_ids", self.stop_token_ids, vocab_size)
        p.ignore_eos = _checks.boolean("ignore_eos", self.ignore_eos)
        p.include_stop_str_in_output = _checks.boolean("include_stop_str_in_output",
                                                       self.include_stop_str_in_output)
        p.skip_special_tokens = _checks.boolean("skip_special_tokens", self.skip_special_tokens)
        if self.logprobs is not None:
            p.top_logprobs = _checks.integer("logprobs", self.logprobs, 0, 20, whole_floats=True)
        if self.prompt_logprobs is not None:
            p.prompt_logprobs = _checks.integer("prompt_logprobs", self.prompt_logprobs, 0, 20, whole_floats=True)
        if self.logit_bias is not None:
            p.logit_bias = _checks.bias_map("logit_bias", self.logit_bias)
        if self.allowed_token_ids is not None:
            p.allowed_token_ids = _checks.token_ids("allowed_token_ids", self.allowed_token_ids, vocab_size)
        if self.bad_words is not None:
            p.bad_words = _checks.texts("bad_words", self.bad_words)
        p.grammar = self._grammar()
        p.validate()
        return p

    def _schema_text(self) -> str:
        if isinstance(self.json_schema, str):
            return _checks.text("json_schema", self.json_schema)
        try:
            return json.dumps(self.json_schema)
        except (TypeError, ValueError) as e:
            raise ValueError(f"json_schema must be a dict or JSON text: {e}") from None

    def _grammar(self) -> str:
        given = [k for k in ("json_schema", "regex", "choice", "grammar") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} both constrain the output; give one")
        if self.json_schema is not None:
            return _core.json_schema_grammar(self._schema_text())
        if self.regex is not None:
            return _core.regex_grammar(_checks.text("regex", self.regex))
        if self.choice is not None:
            choices = _checks.texts("choice", self.choice)
            if not choices:
                raise ValueError(f"choice must list at least one string, got {self.choice!r}")
            return _core.choice_grammar(choices)
        if self.grammar is not None:
            _core.check_grammar(_checks.text("grammar", self.grammar))
            return self.grammar
        return ""
