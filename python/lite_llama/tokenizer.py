"""The model's tokenizer and chat template, as a small subset of HF's tokenizer API."""
from __future__ import annotations

import json
import numbers
import os
import warnings
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
        if role not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"role {role!r} is not supported (system, user, assistant or tool)")
        reasoning = m.get("reasoning_content") or ""
        calls = m.get("tool_calls")
        if calls and role != "assistant":
            raise ValueError("only assistant messages carry 'tool_calls'")
        call_id = m.get("tool_call_id")
        if call_id is not None and not isinstance(call_id, str):
            raise ValueError(f"tool_call_id must be a string, got {call_id!r}")
        # The engine hands tool_calls to the template as objects, arguments parsed (as vLLM).
        out.append(_core.ChatMessage(role, _content(m, role),
                                     _checks.text("reasoning_content", str(reasoning)),
                                     _json("tool_calls", list(calls), list) if calls else "",
                                     _checks.text("tool_call_id", call_id or "")))
    return out


def _json(name: str, value: Any, kind: type) -> str:
    if not isinstance(value, kind):
        raise ValueError(f"{name} must be a {kind.__name__}, got {value!r}")
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be JSON values: {e}") from None


def chat_flags(add_generation_prompt: object, continue_final_message: object) -> Tuple[bool, bool]:
    """add_generation_prompt and continue_final_message as booleans (ValueError otherwise); the
    engine's apply_chat_template checks the pair and the final message, as vLLM does."""
    return (_checks.boolean("add_generation_prompt", add_generation_prompt),
            _checks.boolean("continue_final_message", continue_final_message))


def template_kwargs_json(kwargs: Optional[Mapping[str, Any]],
                         tools: Optional[Sequence[Mapping[str, Any]]] = None) -> str:
    """The template's extra variables as JSON: ``tools`` first, then ``kwargs`` over it (vLLM's
    order, so chat_template_kwargs={"tools": ...} wins)."""
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ValueError(f"chat_template_kwargs must be a dict, got {kwargs!r}")
    extra: Dict[str, Any] = {}
    if tools is not None:
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence) or \
                not all(isinstance(t, Mapping) for t in tools):
            raise ValueError(f"tools must be a list of tool dicts, got {tools!r}")
        extra["tools"] = [dict(t) for t in tools]
    extra.update(kwargs or {})
    return _json("chat_template_kwargs", extra, dict) if extra else ""


def load_chat_template(chat_template: Optional[str]) -> str:
    """vLLM's chat_template argument: Jinja source, or the path of a file holding it ("" for the
    model's own template)."""
    if chat_template is None:
        return ""
    if not isinstance(chat_template, (str, os.PathLike)) or not os.fspath(chat_template):
        raise ValueError(f"chat_template must be a Jinja template or a file path, got {chat_template!r}")
    path = os.fspath(chat_template)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    if not any(c in path for c in "{}\n"):  # as vLLM: not a template, so a path that is missing
        raise ValueError(f"chat_template looks like a file path, but '{path}' is not a file")
    return _checks.text("chat_template", path)


# transformers' named special tokens (PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES), in its order.
SPECIAL_TOKENS_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                             "mask_token")


def _config_token(value: Any) -> Optional[str]:
    """A token as tokenizer_config.json names it: a string, or an AddedToken {"content": ...}."""
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else None


def hf_tokenizer_config(info: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """tokenizer_config.json of the folder whose tokenizer.json the engine loaded (an HF model, or
    dummy weights beside tokenizer files; {} where that folder has none); None for a GGUF."""
    if info.get("format") not in ("hf", "dummy"):
        return None
    path = info["path"]
    folder = path if os.path.isdir(path) else os.path.dirname(path)  # dummy: the config.json
    if not os.path.isfile(os.path.join(folder, "tokenizer.json")):
        return None  # token ids only: no special tokens
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    if not os.path.isfile(cfg_path):
        return {}
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    return cfg if isinstance(cfg, dict) else {}


def hf_special_tokens(cfg: Mapping[str, Any]) -> Tuple[Dict[str, str], List[str]]:
    """transformers' (5.x) special tokens of a tokenizer_config.json: the named ones (bos_token ...
    mask_token, then model-specific ``*_token`` keys and a dict ``extra_special_tokens``) and the
    extra ones (``extra_special_tokens``, or the older ``additional_special_tokens``)."""
    named = {k: t for k in SPECIAL_TOKENS_ATTRIBUTES if (t := _config_token(cfg.get(k))) is not None}
    for k, v in cfg.items():  # model-specific named tokens: image_token and the like
        if k.endswith("_token") and k not in SPECIAL_TOKENS_ATTRIBUTES and isinstance(v, str):
            named[k] = v
    extra = cfg.get("extra_special_tokens") or cfg.get("additional_special_tokens") or []
    if isinstance(extra, Mapping):  # named too; additional_special_tokens are the extra ones then
        named.update((k, t) for k, v in extra.items() if (t := _config_token(v)) is not None)
        extra = cfg.get("additional_special_tokens") or []
    return named, [t for t in map(_config_token, extra if isinstance(extra, list) else []) if t is not None]


def clean_up_tokenization(text: str) -> str:
    """transformers' ``clean_up_tokenization``: no space before punctuation and English contractions."""
    for old, new in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                     (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(old, new)
    return text


class BatchEncoding(dict):
    """What ``Tokenizer.__call__`` returns: HF's BatchEncoding as far as plain lists go, a dict
    whose keys (``input_ids``, ``attention_mask``) are also attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _named_token(name: str) -> Tuple[property, property]:
    """The ``<name>`` and ``<name>_id`` properties of a named special token (transformers')."""
    return (property(lambda self: self._named.get(name), doc=f"transformers' ``{name}`` (None when unset)."),
            property(lambda self: self._special_id(self._named.get(name)), doc=f"The id of ``{name}``."))


class Tokenizer:
    """The model's tokenizer (``LLM.get_tokenizer()``): calling it, ``encode``, ``decode``,
    ``batch_decode``, ``get_vocab``, ``convert_ids_to_tokens``, ``convert_tokens_to_ids``,
    ``apply_chat_template`` and the special tokens (``all_special_tokens``, ``special_tokens_map``,
    ``unk_token`` ...) shaped like Hugging Face's (transformers 5's ``PreTrainedTokenizerFast``)."""

    unk_token, unk_token_id = _named_token("unk_token")
    sep_token, sep_token_id = _named_token("sep_token")
    cls_token, cls_token_id = _named_token("cls_token")
    mask_token, mask_token_id = _named_token("mask_token")

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
        self.padding_side: str = "right"  # HF's default; __call__(padding=True) pads on this side
        # transformers' special tokens: what tokenizer_config.json names (as AutoTokenizer reads it),
        # or for a GGUF the tokens of its bos / eos / unknown / padding ids (transformers' GGUF loader).
        cfg = hf_tokenizer_config(info)
        self._named: Dict[str, str] = {}
        self._extra: List[str] = []
        if cfg is not None:
            self._named, self._extra = hf_special_tokens(cfg)
        elif info.get("format") == "gguf":
            self._named = {f"{k}_token": core.token_text(special[k]) for k in ("bos", "eos", "unk", "pad")
                           if k in special}
        cfg = cfg or {}
        # decode's default, and transformers' (5.x) switch that lets the cleanup touch a BPE
        # tokenizer's text (every tokenizer of this engine is BPE); settable, as HF's attributes.
        self.clean_up_tokenization_spaces: bool = bool(cfg.get("clean_up_tokenization_spaces"))
        self.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output: bool = \
            bool(cfg.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"))

    @property
    def bos_token(self) -> Optional[str]:
        return None if self.bos_token_id is None else self._core.token_text(self.bos_token_id)

    @property
    def eos_token(self) -> Optional[str]:
        return None if self.eos_token_id is None else self._core.token_text(self.eos_token_id)

    @property
    def pad_token(self) -> Optional[str]:
        return None if self.pad_token_id is None else self._core.token_text(self.pad_token_id)

    @property
    def special_tokens_map(self) -> Dict[str, str]:
        """The named special tokens that are set (``{"bos_token": "<|begin_of_text|>", ...}``), as
        transformers 5's (which leaves the extra ones out)."""
        return dict(self._named)

    @property
    def extra_special_tokens(self) -> List[str]:
        """tokenizer_config.json's ``extra_special_tokens`` (``additional_special_tokens`` before
        transformers 5), e.g. Qwen's ``<|im_start|>``."""
        return list(self._extra)

    @property
    def extra_special_tokens_ids(self) -> List[Optional[int]]:
        return [self._special_id(t) for t in self._extra]

    @property
    def all_special_tokens(self) -> List[str]:
        """The named special tokens, then the extra ones, each once, as transformers'."""
        return list(dict.fromkeys([*self._named.values(), *self._extra]))

    @property
    def all_special_ids(self) -> List[Optional[int]]:
        """The ids of ``all_special_tokens``, as transformers'."""
        return [self._special_id(t) for t in self.all_special_tokens]

    def __getattr__(self, name: str) -> Any:
        # Model-specific named tokens (tokenizer_config.json's image_token and the like) and their
        # ids: image_token, image_token_id, as transformers'.
        named = self.__dict__.get("_named", {})
        key = name[:-3] if name.endswith("_token_id") else name
        if key.endswith("_token") and key in named:
            return named[key] if key == name else self._special_id(named[key])
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _special_id(self, token: Optional[str]) -> Optional[int]:
        # transformers' convert_tokens_to_ids: a string not in the vocabulary is the unknown token.
        if token is None:
            return None
        vocab = self._vocab()
        return vocab[token] if token in vocab else vocab.get(self._named.get("unk_token", ""))

    def convert_ids_to_tokens(self, ids: Union[int, Sequence[int]],
                              skip_special_tokens: bool = False) -> Union[str, List[str]]:
        """The vocabulary's strings of ``ids`` (byte-level pieces such as ``"Ġworld"``), as HF's."""
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
            return self._core.token_text(_checks.token_id("ids", ids, self.vocab_size))
        ids = _checks.token_ids("ids", ids, self.vocab_size)
        if _checks.boolean("skip_special_tokens", skip_special_tokens):
            ids = [t for t in ids if not self._is_special(t)]
        return [self._core.token_text(t) for t in ids]

    def tokenize(self, text: str) -> List[str]:
        """The token strings of ``text`` without BOS/EOS (HF's ``tokenize``)."""
        return [self._core.token_text(t) for t in self.encode(_checks.text("text", text), False)]

    def convert_tokens_to_ids(self, tokens: Union[str, Sequence[str]]) -> Union[Optional[int], List[Optional[int]]]:
        """The ids of vocabulary strings, as HF's; None for a string not in the vocabulary
        (HF gives the unknown token's id, where the tokenizer has one)."""
        vocab = self._vocab()
        if isinstance(tokens, str):
            return vocab.get(tokens)
        return [vocab.get(t) for t in _checks.texts("tokens", tokens)]

    def get_vocab(self) -> Dict[str, int]:
        """Token string -> id for the whole vocabulary, added tokens included, as HF's (a copy)."""
        return dict(self._vocab())

    def _vocab(self) -> Dict[str, int]:
        if self._ids is None:
            ids: Dict[str, int] = {}
            for t in range(self.vocab_size):
                try:
                    ids.setdefault(self._core.token_text(t), t)
                except ValueError:  # embedding rows past the tokenizer's vocabulary
                    break
            self._ids = ids
        return self._ids

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of ``text``; special tokens written in the text (``<|im_start|>``) are
        parsed, as HF does. ``add_special_tokens`` adds BOS where the model asks for it."""
        text = _checks.text("text", text)
        return self._core.tokenize(text, _checks.boolean("add_special_tokens", add_special_tokens), True)

    def __call__(self, text: Union[str, Sequence[str]], add_special_tokens: bool = True,
                 padding: Union[bool, str] = False, padding_side: Optional[str] = None,
                 return_attention_mask: bool = True) -> BatchEncoding:
        """HF's ``tokenizer(text)``: ``{"input_ids": [...], "attention_mask": [...]}`` for a
        string, lists of lists for a list of strings. ``padding=True`` (``"longest"``) pads the
        list to its longest with the pad token, on ``padding_side`` (default ``self.padding_side``,
        ``"right"``), mask 0 there. No tensors: ``np.array(enc["input_ids"])`` after padding."""
        one = isinstance(text, str)
        texts = [text] if one else _checks.texts("text", text)
        if padding not in (False, True, "longest", "do_not_pad"):
            raise ValueError(f"padding must be True, False, 'longest' or 'do_not_pad', got {padding!r}")
        side = _checks.one_of("padding_side", self.padding_side if padding_side is None else padding_side,
                              ("right", "left"))
        ids = [self.encode(t, add_special_tokens) for t in texts]
        masks = [[1] * len(x) for x in ids]
        longest = max((len(x) for x in ids), default=0)
        if padding in (True, "longest") and any(len(x) < longest for x in ids):
            if self.pad_token_id is None:  # HF's refusal too
                raise ValueError("padding needs a pad token, and this tokenizer has none")
            for i, x in enumerate(ids):
                k = longest - len(x)
                if side == "right":
                    ids[i], masks[i] = x + [self.pad_token_id] * k, masks[i] + [0] * k
                else:
                    ids[i], masks[i] = [self.pad_token_id] * k + x, [0] * k + masks[i]
        out = BatchEncoding(input_ids=ids[0] if one else ids)
        if _checks.boolean("return_attention_mask", return_attention_mask):
            out["attention_mask"] = masks[0] if one else masks
        return out

    def decode(self, ids: Union[int, Sequence[int]], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: Optional[bool] = None) -> str:
        """The text of ``ids``; ``skip_special_tokens`` drops control tokens (``<|im_end|>``).

        ``clean_up_tokenization_spaces`` (None: the attribute of that name, tokenizer_config.json's)
        asks for ``clean_up_tokenization``. As in transformers 5, a BPE tokenizer (every one here)
        ignores it, with a warning, unless the attribute (or tokenizer_config.json key)
        ``clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output`` is set."""
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):  # numpy's ints too
            ids = [_checks.token_id("ids", ids)]
        else:
            ids = _checks.token_ids("ids", ids)
        if _checks.boolean("skip_special_tokens", skip_special_tokens):
            ids = [t for t in ids if not self._is_special(t)]
        return self._clean_up(self._core.detokenize(ids), clean_up_tokenization_spaces)

    def batch_decode(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: Optional[bool] = None) -> List[str]:
        """``decode`` of each id list, as HF's."""
        if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Sequence):
            raise ValueError(f"sequences must be a list of token id lists, got {sequences!r}")
        return [self.decode(s, skip_special_tokens, clean_up_tokenization_spaces) for s in sequences]

    def clean_up_tokenization(self, text: str) -> str:
        """transformers' cleanup (``" ."`` -> ``"."``, ``" n't"`` -> ``"n't"`` ...), unconditionally."""
        return clean_up_tokenization(_checks.text("text", text))

    def _clean_up(self, text: str, asked: Optional[bool]) -> str:
        on = self.clean_up_tokenization_spaces if asked is None else \
            _checks.boolean("clean_up_tokenization_spaces", asked)
        if not on:
            return text
        if self.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output:
            return clean_up_tokenization(text)
        if asked:  # transformers warns too (Python's filter shows it once per calling line)
            warnings.warn("clean_up_tokenization_spaces=True is ignored for a BPE tokenizer, as in "
                          "transformers 5 (the cleanup strips real spaces before punctuation); set "
                          "tokenizer.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"
                          " = True to apply it anyway", UserWarning, stacklevel=3)
        return text

    def apply_chat_template(
        self,
        messages: Sequence[Message],
        tokenize: bool = False,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        chat_template: Optional[str] = None,
        **kwargs: Any,
    ) -> Union[str, List[int]]:
        """Renders ``messages`` with the model's chat template, or with ``chat_template`` (Jinja
        source or a file of it); ``tools`` (OpenAI-style tool dicts) and extra keyword arguments
        become template variables (``enable_thinking=False``). Unlike HF, the defaults are
        ``tokenize=False`` and ``add_generation_prompt=True``. ``continue_final_message`` (with
        ``add_generation_prompt=False``) ends the text right after the final assistant message's
        content, as HF's and ``LLM.chat``'s."""
        msgs = to_chat_messages(messages)
        add, cont = chat_flags(add_generation_prompt, continue_final_message)
        text = self._core.apply_chat_template(msgs, add, template_kwargs_json(kwargs, tools), cont,
                                              load_chat_template(chat_template))
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
