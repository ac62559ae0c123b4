"""The model's tokenizer and chat template, as a small subset of HF's tokenizer API."""
from __future__ import annotations

import json
import numbers
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _checks, _core

Message = Mapping[str, Any]


def _content(m: Message, role: str) -> str:
    c = m.get("content")
    if c is None:
        if role == "assistant":  # a content-less assistant turn (a tool call in OpenAI's API)
            return ""
        raise ValueError(f"a '{role}' message needs 'content'")
    if isinstance(c, str):
        return _checks.text("messages.content", c)
    if not isinstance(c, (list, tuple)):
        raise ValueError(f"messages.content must be a string or a list of content parts, got {c!r}")
    texts = []
    for part in c:
        if not isinstance(part, Mapping) or part.get("type") != "text":
            raise ValueError(f"content parts must be {{'type': 'text', 'text': ...}}, got {part!r}")
        if not isinstance(part.get("text"), str):
            raise ValueError("a text content part needs 'text'")
        texts.append(_checks.text("messages.content", part["text"]))
    return "\n".join(texts)  # as the server joins them


def to_chat_messages(messages: Sequence[Message]) -> List[_core.ChatMessage]:
    """OpenAI-style message dicts -> the engine's messages (ValueError for anything else)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    out = []
    for m in messages:
        if not isinstance(m, Mapping):
            raise ValueError(f"every message must be a dict, got {m!r}")
        role = m.get("role")
        if role == "developer":  # OpenAI's newer name for the system role
            role = "system"
        if role not in ("system", "user", "assistant"):
            raise ValueError(f"role {role!r} is not supported (system, user or assistant)")
        reasoning = m.get("reasoning_content") or ""
        out.append(_core.ChatMessage(role, _content(m, role),
                                     _checks.text("reasoning_content", str(reasoning))))
    return out


def chat_flags(add_generation_prompt: object, continue_final_message: object) -> Tuple[bool, bool]:
    """add_generation_prompt and continue_final_message as booleans (ValueError otherwise); the
    engine's apply_chat_template checks the pair and the final message, as vLLM does."""
    return (_checks.boolean("add_generation_prompt", add_generation_prompt),
            _checks.boolean("continue_final_message", continue_final_message))


def template_kwargs_json(kwargs: Optional[Mapping[str, Any]]) -> str:
    if not kwargs:
        return ""
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"chat_template_kwargs must be a dict, got {kwargs!r}")
    try:
        return json.dumps(dict(kwargs))
    except TypeError as e:
        raise ValueError(f"chat_template_kwargs must be JSON values: {e}") from None


class Tokenizer:
    """The model's tokenizer (``LLM.get_tokenizer()``): ``encode``, ``decode``,
    ``convert_ids_to_tokens``, ``convert_tokens_to_ids`` and ``apply_chat_template`` shaped like
    Hugging Face's."""

    def __init__(self, core: _core.Engine) -> None:
        self._core = core
        info = core.info()
        special: Dict[str, int] = info["special_tokens"]
        self.bos_token_id: Optional[int] = special.get("bos")
        self.eos_token_id: Optional[int] = special.get("eos")
        self.pad_token_id: Optional[int] = special.get("pad")
        self.vocab_size: int = info["vocab_size"]
        self._special: Dict[int, bool] = {}
        self._ids: Optional[Dict[str, int]] = None  # token string -> id, built on first use

    @property
    def bos_token(self) -> Optional[str]:
        return None if self.bos_token_id is None else self._core.token_text(self.bos_token_id)

    @property
    def eos_token(self) -> Optional[str]:
        return None if self.eos_token_id is None else self._core.token_text(self.eos_token_id)

    @property
    def pad_token(self) -> Optional[str]:
        return None if self.pad_token_id is None else self._core.token_text(self.pad_token_id)

    def convert_ids_to_tokens(self, ids: Union[int, Sequence[int]],
                              skip_special_tokens: bool = False) -> Union[str, List[str]]:
        """The vocabulary's strings of ``ids`` (byte-level pieces such as ``"Ġworld"``), as HF's."""
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
            return self._core.token_text(_checks.token_id("ids", ids, self.vocab_size))
        ids = _checks.token_ids("ids", ids, self.vocab_size)
        if _checks.boolean("skip_special_tokens", skip_special_tokens):
            ids = [t for t in ids if not self._is_special(t)]
        return [self._core.token_text(t) for t in ids]

    def convert_tokens_to_ids(self, tokens: Union[str, Sequence[str]]) -> Union[Optional[int], List[Optional[int]]]:
        """The ids of vocabulary strings, as HF's; None for a string not in the vocabulary
        (HF gives the unknown token's id, where the tokenizer has one)."""
        if self._ids is None:
            ids: Dict[str, int] = {}
            for t in range(self.vocab_size):
                try:
                    ids.setdefault(self._core.token_text(t), t)
                except ValueError:  # embedding rows past the tokenizer's vocabulary
                    break
            self._ids = ids
        if isinstance(tokens, str):
            return self._ids.get(tokens)
        return [self._ids.get(t) for t in _checks.texts("tokens", tokens)]

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of ``text``; special tokens written in the text (``<|im_start|>``) are
        parsed, as HF does. ``add_special_tokens`` adds BOS where the model asks for it."""
        text = _checks.text("text", text)
        return self._core.tokenize(text, _checks.boolean("add_special_tokens", add_special_tokens), True)

    def decode(self, ids: Union[int, Sequence[int]], skip_special_tokens: bool = False) -> str:
        """The text of ``ids``; ``skip_special_tokens`` drops control tokens (``<|im_end|>``)."""
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):  # numpy's ints too
            ids = [_checks.token_id("ids", ids)]
        else:
            ids = _checks.token_ids("ids", ids)
        if _checks.boolean("skip_special_tokens", skip_special_tokens):
            ids = [t for t in ids if not self._is_special(t)]
        return self._core.detokenize(ids)

    def apply_chat_template(
        self,
        messages: Sequence[Message],
        tokenize: bool = False,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        **kwargs: Any,
    ) -> Union[str, List[int]]:
        """Renders ``messages`` with the model's chat template; extra keyword arguments become
        template variables (``enable_thinking=False``). Unlike HF, the defaults are
        ``tokenize=False`` and ``add_generation_prompt=True``. ``continue_final_message`` (with
        ``add_generation_prompt=False``) ends the text right after the final assistant message's
        content, as HF's and ``LLM.chat``'s."""
        msgs = to_chat_messages(messages)
        add, cont = chat_flags(add_generation_prompt, continue_final_message)
        text = self._core.apply_chat_template(msgs, add, template_kwargs_json(kwargs), cont)
        if _checks.boolean("tokenize", tokenize):
            return self._core.tokenize(text, False, True)  # the template wrote BOS where needed
        return text

    def __len__(self) -> int:
        return self.vocab_size

    def _is_special(self, token: int) -> bool:
        # A special (control) token is one that only special-token parsing turns its text into:
        # the public engine API exposes no token kinds, and this holds for every tokenizer kind.
        hit = self._special.get(token)
        if hit is None:
            text = self._core.detokenize([token])
            hit = bool(text) and self._core.tokenize(text, False, True) == [token] and \
                self._core.tokenize(text, False, False) != [token]
            self._special[token] = hit
        return hit
