"""LLM: the offline API (vLLM's shape) over the native engine."""
from __future__ import annotations

import importlib
import math
import os
import random
import time
from collections import Counter
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast

from . import _checks, _core
from .outputs import CompletionOutput, Logprob, PromptLogprobs, RequestOutput, ScoreOutput
from .sampling_params import SamplingParams
from .tokenizer import Message, Tokenizer, chat_flags, load_chat_template, template_kwargs_json, to_chat_messages

PromptType = Union[str, List[int], Mapping[str, Any]]
Prompts = Union[PromptType, Sequence[PromptType]]
ParamsArg = Union[SamplingParams, Sequence[SamplingParams], None]
Item = Tuple[Optional[str], List[int]]  # a parsed prompt: its text (None for token ids), its ids

_DTYPES = {"auto": "auto", "bfloat16": "bf16", "bf16": "bf16",
           "float16": "fp16", "half": "fp16", "fp16": "fp16"}


class _Progress:
    """Feeds a tqdm-like bar (one step per finished prompt) from the engine loop's callback."""

    def __init__(self, factory: Callable[..., Any], owner: List[int]) -> None:
        self._owner = owner
        self._left = Counter(owner)
        self._t0 = time.perf_counter()
        self._bar = factory(total=len(self._left), desc="Processed prompts", dynamic_ncols=True)

    def __call__(self, finished: List[int], generated: int) -> None:
        done = 0
        for k in finished:
            i = self._owner[k]
            self._left[i] -= 1
            done += self._left[i] == 0
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        if hasattr(self._bar, "set_postfix_str"):
            self._bar.set_postfix_str(f"output: {generated / elapsed:.1f} toks/s", refresh=False)
        if done:
            self._bar.update(done)

    def close(self) -> None:
        self._bar.close()


def _tqdm_factory(use_tqdm: Union[bool, Callable[..., Any]]) -> Optional[Callable[..., Any]]:
    if callable(use_tqdm):
        return use_tqdm
    if not use_tqdm:
        return None
    try:
        return cast(Callable[..., Any], importlib.import_module("tqdm.auto").tqdm)
    except ImportError:
        return None


class LLM:
    """A model loaded for offline generation, as vLLM's ``LLM``.

    Args:
        model: a ``.gguf`` file, a Hugging Face model directory, or ``"default"`` (the default
            model, found in ``./models`` or ``$LITE_LLAMA_MODELS``), as ``lite-llama -m``.
        device: ``"auto"`` (CUDA when built with it and a GPU is present), ``"cpu"`` or ``"cuda"``.
        dtype: CUDA activation type: ``"auto"`` (float16 where the model's activations fit its
            range, measured at load, else bfloat16), ``"bfloat16"`` or ``"float16"`` (the CPU
            computes in fp32).
        quantize: GPU weight storage: ``"auto"`` (keep the file's), ``"none"``, ``"int8"``,
            ``"int4"`` or ``"fp8"`` (``--quantize``).
        load_format: ``"auto"`` or ``"dummy"`` (random weights; ``model`` names a config.json).
        ctx: max tokens per sequence (0 = the model's limit, at most 131072 on a GPU and 8192 on
            the CPU; cut to the KV pool). ``max_model_len`` is vLLM's name for it.
        max_num_seqs: sequences decoded together (0 = the backend's default).
        max_num_batched_tokens: tokens per step (0 = default).
        kv_tokens: KV pool size in tokens (0 = sized from memory).
        gpu_memory_utilization: fraction of free GPU memory to use.
        enforce_eager: no CUDA graphs.
        enable_prefix_caching: reuse the KV of shared prompt prefixes.
        threads: CPU threads (0 = all cores).
        tensor_parallel_size: split each layer over this many GPUs (devices 0..N-1, NCCL), or
            over as many CPU ranks (``--tp``).
        seed: requests without a seed of their own get seeds drawn from this one (reproducible
            runs); also the dummy weights' seed.
        chat_template: Jinja source, or a file of it, used in place of the model's chat template
            (``--chat-template``); ``chat(chat_template=...)`` still overrides it per call.

    Raises FileNotFoundError for a missing model path, ValueError for bad arguments and
    RuntimeError for anything else the engine refuses (a broken file, an unsupported model).
    """

    def __init__(
        self,
        model: Union[str, "os.PathLike[str]"] = "default",
        *,
        device: str = "auto",
        dtype: str = "auto",
        quantize: str = "auto",
        load_format: str = "auto",
        ctx: int = 0,
        max_num_seqs: int = 0,
        max_num_batched_tokens: int = 0,
        kv_tokens: int = 0,
        gpu_memory_utilization: float = 0.9,
        enforce_eager: bool = False,
        enable_prefix_caching: bool = True,
        threads: int = 0,
        tensor_parallel_size: int = 1,
        seed: Optional[int] = None,
        max_model_len: Optional[int] = None,
        chat_template: Optional[str] = None,
    ) -> None:
        if max_model_len is not None:
            if ctx:
                raise ValueError("give ctx or max_model_len (its vLLM name), not both")
            ctx = max_model_len
        try:
            model = os.fspath(model)
        except TypeError:
            raise ValueError(f"model must be a path or 'default', got {model!r}") from None
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a path or 'default', got {model!r}")
        _checks.text("model", model)
        if model != "default" and not os.path.exists(model):
            raise FileNotFoundError(f"model '{model}' not found")
        gpu_memory_utilization = _checks.number("gpu_memory_utilization", gpu_memory_utilization)
        if not 0.05 <= gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in [0.05, 1], got {gpu_memory_utilization!r}")
        if seed is not None:
            seed = _checks.integer("seed", seed, 0, _checks.UINT64_MAX)
        try:
            self._core = _core.Engine(
                model=model,
                device=_checks.one_of("device", device, ("auto", "cpu", "cuda")),
                dtype=_DTYPES[_checks.one_of("dtype", dtype, tuple(_DTYPES))],
                quantize=_checks.one_of("quantize", quantize, ("auto", "none", "int8", "int4", "fp8")),
                load_format=_checks.one_of("load_format", load_format, ("auto", "dummy")),
                ctx=_checks.count("ctx", ctx),
                max_num_seqs=_checks.count("max_num_seqs", max_num_seqs, 4096),
                max_batched_tokens=_checks.count("max_num_batched_tokens", max_num_batched_tokens),
                kv_tokens=_checks.count("kv_tokens", kv_tokens),
                gpu_memory_utilization=gpu_memory_utilization,
                cuda_graph=not _checks.boolean("enforce_eager", enforce_eager),
                prefix_cache=_checks.boolean("enable_prefix_caching", enable_prefix_caching),
                threads=_checks.count("threads", threads, 1024),
                tensor_parallel_size=_checks.integer("tensor_parallel_size", tensor_parallel_size, 1, 64),
                dummy_seed=seed or 0,
                chat_template=load_chat_template(chat_template),
            )
        except RuntimeError as e:
            raise _checks.engine_error(e) from None
        self._seeds = random.Random(seed) if seed is not None else None
        self._tokenizer = Tokenizer(self._core)
        self._next_request = 0

    # --- generation -------------------------------------------------------------------------

    def generate(
        self,
        prompts: Prompts,
        sampling_params: ParamsArg = None,
        use_tqdm: Union[bool, Callable[..., Any]] = True,
    ) -> List[RequestOutput]:
        """Generates completions for every prompt as one continuously batched run.

        Args:
            prompts: a string, a list of strings, token ids (a list of ints, a list of such
                lists, or ``{"prompt_token_ids": [...]}`` dicts), or ``{"prompt": "..."}`` dicts.
                Text is tokenized with BOS where the model adds it; special tokens written in it
                are parsed (as vLLM and the server do).
            sampling_params: one ``SamplingParams`` for all prompts, or one per prompt
                (default: ``SamplingParams()``).
            use_tqdm: show a progress bar (tqdm, when installed); a callable is used in place of
                ``tqdm.tqdm``.

        Returns one ``RequestOutput`` per prompt, in input order. Ctrl-C cancels the run (the
        engine's KV slots are freed) and raises KeyboardInterrupt; the LLM stays usable. A
        constraint (``json_schema``, ...) that no token can continue raises ValueError.
        """
        items = self._parse_prompts(prompts)
        return self._run(items, self._params_list(sampling_params, len(items)), use_tqdm)

    def chat(
        self,
        messages: Union[Sequence[Message], Sequence[Sequence[Message]]],
        sampling_params: ParamsArg = None,
        use_tqdm: Union[bool, Callable[..., Any]] = True,
        *,
        chat_template: Optional[str] = None,
        chat_template_kwargs: Optional[Mapping[str, Any]] = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> List[RequestOutput]:
        """Generates replies to one conversation (a list of ``{"role", "content"}`` dicts) or to
        a list of conversations, rendered with the model's chat template, or with
        ``chat_template`` (Jinja source, or a file of it) as vLLM's. ``tools`` (OpenAI-style
        ``{"type": "function", "function": {...}}`` dicts) is the template's ``tools`` variable;
        messages may carry assistant ``tool_calls`` and role ``tool`` replies (``tool_call_id``).
        ``chat_template_kwargs`` become template variables (``{"enable_thinking": False}``), over
        ``tools``. ``continue_final_message`` (with ``add_generation_prompt=False``, as vLLM)
        continues the final assistant message instead of answering it."""
        one = isinstance(messages, Sequence) and bool(messages) and isinstance(messages[0], Mapping)
        convs = cast(Sequence[Sequence[Message]], [messages] if one else messages)
        if isinstance(convs, (str, bytes)) or not isinstance(convs, Sequence) or not convs:
            raise ValueError("messages must be a conversation (a list of message dicts) or a list of them")
        extra = template_kwargs_json(chat_template_kwargs, tools)
        source = load_chat_template(chat_template)
        items = [self._render(c, extra, add_generation_prompt, continue_final_message, source) for c in convs]
        return self._run(items, self._params_list(sampling_params, len(items)), use_tqdm)

    def generate_stream(self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None) -> Iterator[str]:
        """Yields the text of one prompt's completion as it is generated (deltas that concatenate
        to ``generate``'s text). Closing the iterator early (``break``) cancels the request. One
        stream at a time; ``n`` must be 1."""
        items = self._parse_prompts(prompt)
        if len(items) != 1:
            raise ValueError("generate_stream takes one prompt")
        return self._stream(items[0][1], self._stream_params(sampling_params))

    def chat_stream(
        self,
        messages: Sequence[Message],
        sampling_params: Optional[SamplingParams] = None,
        *,
        chat_template: Optional[str] = None,
        chat_template_kwargs: Optional[Mapping[str, Any]] = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> Iterator[str]:
        """``generate_stream`` for one conversation rendered with the chat template (the
        arguments as ``chat``'s)."""
        _, ids = self._render(messages, template_kwargs_json(chat_template_kwargs, tools), add_generation_prompt,
                              continue_final_message, load_chat_template(chat_template))
        return self._stream(ids, self._stream_params(sampling_params))

    # --- scoring, tokenizer, state ------------------------------------------------------------

    def score(self, text: Union[str, Sequence[int]], decode_tail: int = 0) -> ScoreOutput:
        """Teacher-forced log-probabilities of ``text`` (or token ids), as ``lite-llama score``:
        the text is tokenized with BOS and special tokens are not parsed. ``decode_tail`` scores
        the last N tokens through decode steps instead of prefill."""
        if isinstance(text, str):
            ids = self._core.tokenize(_checks.text("text", text), True, False)
        else:
            ids = _checks.token_ids("score's input", text)
        r = self._core.score([ids], _checks.count("decode_tail", decode_tail))[0]
        s = 0.0
        for lp in r.logprobs:  # in the CLI's order, so that the numbers are the CLI's
            s -= lp
        nll = s / len(r.logprobs)
        return ScoreOutput(token_ids=ids, logprobs=list(r.logprobs), argmax=list(r.argmax),
                           nll=nll, perplexity=math.exp(nll))

    def perplexity(self, text: Union[str, Sequence[int]]) -> float:
        """exp(mean negative log-likelihood) of ``text``, as ``lite-llama score``'s ``ppl``."""
        return self.score(text).perplexity

    def get_default_sampling_params(self) -> SamplingParams:
        """The parameters generate() uses when given none (vLLM's; a new object each call)."""
        return SamplingParams()

    def get_tokenizer(self) -> Tokenizer:
        return self._tokenizer

    @property
    def model_info(self) -> Dict[str, Any]:
        """The loaded model: architecture, sizes, device, context, KV slots (``lite-llama info``)."""
        return self._core.info()

    def get_stats(self) -> Dict[str, int]:
        """The engine now: running / waiting requests, KV slots used and total, preemptions,
        prefix-cache counters, GPU memory."""
        return self._core.stats()

    # --- internals ----------------------------------------------------------------------------

    def _parse_prompts(self, prompts: Prompts) -> List[Item]:
        items: Sequence[Any]
        if isinstance(prompts, (str, Mapping)):
            items = [prompts]
        elif isinstance(prompts, (list, tuple)) and prompts and isinstance(prompts[0], int):
            items = [prompts]  # one prompt of token ids
        elif isinstance(prompts, (list, tuple)):
            items = cast(Sequence[Any], prompts)
        else:
            raise ValueError(f"prompts must be a string, token ids, or a list of them; got {type(prompts).__name__}")
        return [self._parse_prompt(p) for p in items]

    def _parse_prompt(self, p: PromptType) -> Item:
        if isinstance(p, str):
            return p, self._core.tokenize(_checks.text("prompt", p), True, True)
        if isinstance(p, Mapping):
            if "prompt_token_ids" in p:
                return p.get("prompt"), _checks.token_ids("prompt_token_ids", p["prompt_token_ids"])
            if isinstance(p.get("prompt"), str):
                return p["prompt"], self._core.tokenize(_checks.text("prompt", p["prompt"]), True, True)
            raise ValueError("a prompt dict needs 'prompt' (a string) or 'prompt_token_ids'")
        return None, _checks.token_ids("a prompt", p)

    def _render(self, conv: Sequence[Message], extra_json: str, add_generation_prompt: bool,
                continue_final_message: bool, chat_template: str) -> Item:
        msgs = to_chat_messages(conv)
        add, cont = chat_flags(add_generation_prompt, continue_final_message)
        text = self._core.apply_chat_template(msgs, add, extra_json, cont, chat_template)
        return text, self._core.tokenize(text, False, True)  # the template wrote BOS

    def _params_list(self, params: ParamsArg, n: int) -> List[SamplingParams]:
        if params is None:
            params = SamplingParams()
        if isinstance(params, SamplingParams):
            params._to_core(vocab_size=self._tokenizer.vocab_size)
            return [params] * n
        params = list(params) if isinstance(params, Iterable) else []
        if len(params) != n or not all(isinstance(p, SamplingParams) for p in params):
            raise ValueError(f"sampling_params must be one SamplingParams or a list of {n} (one per prompt)")
        for p in {id(p): p for p in params}.values():
            p._to_core(vocab_size=self._tokenizer.vocab_size)  # fields may have changed since construction
        return params

    def _request_seed(self, p: SamplingParams) -> Optional[int]:
        if p.seed is not None or self._seeds is None:
            return p.seed
        return self._seeds.getrandbits(63)

    def _run(self, items: List[Item], params: List[SamplingParams],
             use_tqdm: Union[bool, Callable[..., Any]]) -> List[RequestOutput]:
        flat_ids: List[List[int]] = []
        flat_params: List[_core.SamplingParams] = []
        owner: List[int] = []
        for i, ((_, ids), p) in enumerate(zip(items, params)):
            seed = self._request_seed(p)
            for j in range(p.n):  # choice j uses seed + j, as the server does
                flat_ids.append(ids)
                core = p._to_core(None if seed is None else seed + j, self._tokenizer.vocab_size)
                if j > 0:
                    core.prompt_logprobs = -1  # the prompt is scored once, with choice 0
                flat_params.append(core)
                owner.append(i)
        if not flat_ids:
            return []
        factory = _tqdm_factory(use_tqdm)
        progress = _Progress(factory, owner) if factory else None
        try:
            done = self._core.generate(flat_ids, flat_params, progress)
        finally:
            if progress:
                progress.close()
        outs: List[RequestOutput] = []
        k = 0
        for i, ((text, ids), p) in enumerate(zip(items, params)):
            choices = [self._completion(j, done[k + j], p) for j in range(p.n)]
            outs.append(RequestOutput(request_id=str(self._next_request), prompt=text,
                                      prompt_token_ids=ids, outputs=choices,
                                      prompt_logprobs=self._prompt_logprobs(done[k], p),
                                      num_cached_tokens=done[k].cached_tokens))
            self._next_request += 1
            k += p.n
        return outs

    def _completion(self, index: int, c: _core.Completion, p: SamplingParams) -> CompletionOutput:
        logprobs = None
        cumulative = None
        if p.logprobs is not None:
            logprobs = [self._logprob_dict(t) for t in c.logprobs]
            cumulative = sum(t.logprob for t in c.logprobs)
        return CompletionOutput(index=index, text=c.text, token_ids=list(c.token_ids),
                                cumulative_logprob=cumulative, logprobs=logprobs,
                                finish_reason=c.finish_reason,
                                stop_reason=self._stop_reason(c, p))

    def _prompt_logprobs(self, c: _core.Completion, p: SamplingParams) -> Optional[PromptLogprobs]:
        if p.prompt_logprobs is None:
            return None
        # The first prompt token has nothing before it to be predicted from (vLLM's None).
        return [None] + [self._logprob_dict(t) for t in c.prompt_logprobs]

    def _logprob_dict(self, t: _core.TokenLogprobs) -> Dict[int, Logprob]:
        decode = self._core.detokenize
        ranks = {tok: r for r, (tok, _) in enumerate(t.top, 1)}
        # The chosen token's rank over the whole vocabulary; its place in the list where it is
        # listed (the two differ only on ties), as vLLM's dict of both keeps the list's.
        d = {t.token: Logprob(t.logprob, ranks.get(t.token, t.rank), decode([t.token]))}
        for tok, lp in t.top:
            if tok not in d:
                d[tok] = Logprob(lp, ranks[tok], decode([tok]))
        return d

    def _stop_reason(self, c: _core.Completion, p: SamplingParams) -> Union[int, str, None]:
        if c.finish_reason != "stop" or not c.token_ids:
            return None
        last = c.token_ids[-1]
        if last == self._tokenizer.eos_token_id and not p.ignore_eos:
            return None  # vLLM checks EOS first, and searches no stop string in its text
        if p.stop_token_ids and last in p.stop_token_ids:
            return last
        full = self._core.detokenize(c.token_ids)
        for s in p.stop_strings:
            if (p.include_stop_str_in_output and c.text.endswith(s)) or (c.text + s) in full:
                return s
        return None  # end of sequence

    def _stream_params(self, p: Optional[SamplingParams]) -> _core.SamplingParams:
        p = SamplingParams() if p is None else p
        if not isinstance(p, SamplingParams):
            raise ValueError("sampling_params must be one SamplingParams")
        if p.n != 1:
            raise ValueError(f"streaming generates one completion (n=1), got n={p.n}")
        return p._to_core(self._request_seed(p), self._tokenizer.vocab_size)

    def _stream(self, ids: List[int], params: _core.SamplingParams) -> Iterator[str]:
        rid = self._core.add_request(ids, params)
        finished = False
        try:
            while not finished:
                for o in self._core.step():
                    if o.id != rid:
                        continue
                    finished = o.finished
                    if o.text:
                        yield o.text
                    if o.error:  # the grammar left no token: generate's ValueError
                        raise ValueError(o.error)
        finally:
            if not finished:  # closed early, or an exception (KeyboardInterrupt) in between
                self._core.abort([rid])
