"""Argument checks of the Python API, in one place: every value is checked here before it
reaches the native module, so that a bad argument is a one-line ValueError naming it (never
pybind11's multi-line TypeError or a cast RuntimeError), and no value is silently reinterpreted
(a string taken as a list of characters, ``"no"`` taken as True)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
import math
import numbers
import struct
from typing import Any, List, Optional, Sequence, Tuple

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


def _range(lo: Optional[int], hi: Optional[int]) -> str:
    if hi is None:
        return f">= {lo}"
    if lo is None:
        return f"<= {hi}"
    return f"in [{lo}, {hi}]"


def integer(name: str, value: object, lo: Optional[int] = None, hi: Optional[int] = None, *,
            whole_floats: bool = False, what: str = "") -> int:
    """``value`` as an int in [lo, hi] (a bool is not an int; ``whole_floats``: 16.0 is 16). numpy's
    integers and floats count too: they register as ``numbers.Integral`` / ``numbers.Real``."""
    ok = isinstance(value, numbers.Integral) or (
        whole_floats and isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer())
    if isinstance(value, bool) or not ok:
        raise ValueError(f"{name} must be an integer{what}, got {value!r}")
    v = int(value) if isinstance(value, numbers.Integral) else int(float(value))  # type: ignore[arg-type]
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{name} must be an integer {_range(lo, hi)}{what}, got {value!r}")
    return v


def count(name: str, value: object, hi: int = INT32_MAX) -> int:
    """An engine size: 0 = automatic."""
    return integer(name, value, 0, hi, what=" (0 = automatic)")


def number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        f = float(value)
    except OverflowError:  # an int beyond a double's range
        raise ValueError(f"{name} must be a number in range, got {value!r}") from None
    try:
        struct.pack("<f", f)  # the engine holds a float: refused where it would round to inf
    except OverflowError:
        raise ValueError(f"{name} must be a number in float32's range, got {value!r}") from None
    return f


def boolean(name: str, value: object) -> bool:
    """True or False only (numpy's bool too): ``"no"`` or 2 is a mistake, not True."""
    t = type(value)
    if isinstance(value, bool) or (t.__module__ == "numpy" and t.__name__ in ("bool_", "bool")):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


def text(name: str, value: object) -> str:
    """A str the engine can take: encodable as UTF-8 (no lone surrogates)."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name} must be valid Unicode text, got the lone surrogate "
                         f"{e.object[e.start:e.end]!r} at position {e.start}") from None
    return value


def one_of(name: str, value: object, allowed: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _items(name: str, value: object, kind: str) -> List[Any]:
    """A list, tuple (or other iterable) of items; a string or a dict is not one."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(f"{name} must be a list of {kind}, got {value!r}")
    return list(value)


def texts(name: str, value: object) -> List[str]:
    """A list of strings (a string alone is refused: it is not a list of its characters)."""
    items = _items(name, value, "strings")
    for s in items:
        if not isinstance(s, str):
            raise ValueError(f"{name} must be a list of strings, got {value!r}")
        text(name, s)
    return items


def token_id(name: str, value: object, vocab_size: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must hold token ids (ints), got {value!r}")
    value = int(value)
    hi = INT32_MAX + 1 if vocab_size is None else vocab_size
    if not 0 <= value < hi:
        raise ValueError(f"{name}: token id {value} out of range [0, {hi})")
    return value


def token_ids(name: str, value: object, vocab_size: Optional[int] = None) -> List[int]:
    return [token_id(name, t, vocab_size) for t in _items(name, value, "ints")]


def bias_map(name: str, value: object) -> List[Tuple[int, float]]:
    """``{token id: bias}`` as (id, bias) pairs; the engine checks ids against its vocabulary
    and the biases' range."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict of token id -> bias, got {value!r}")
    return [(token_id(name, t), number(name, b)) for t, b in value.items()]


def text_or_texts(name: str, value: object) -> List[str]:
    """A string or a list of strings."""
    if isinstance(value, str):
        return [text(name, value)]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(f"{name} must be a string or a list of strings, got {value!r}")
    items = list(value)
    if not all(isinstance(s, str) for s in items):
        raise ValueError(f"{name} must be a string or a list of strings, got {value!r}")
    return [text(name, s) for s in items]


# The engine's set-up errors name the CLI's flags; the Python API's arguments for them.
_FLAG_ARGS = (("--ctx", "ctx"), ("--device", "device"), ("--gpu-memory-utilization", "gpu_memory_utilization"),
              ("--kv-tokens", "kv_tokens"), ("--load-format", "load_format"),
              ("--max-batched-tokens", "max_num_batched_tokens"), ("--max-num-seqs", "max_num_seqs"),
              ("--quantize", "quantize"), ("--tp", "tensor_parallel_size"), ("--chat-template", "chat_template"))


def engine_error(e: RuntimeError) -> Exception:
    """A set-up error about one argument as a ValueError naming the Python argument; others as they are."""
    msg = str(e)
    for flag, arg in _FLAG_ARGS:
        if msg.startswith(flag) and msg[len(flag):len(flag) + 1] in (" ", ":"):
            return ValueError(arg + msg[len(flag):])
    return e
