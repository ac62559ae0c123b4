"""Bad arguments are ValueError (one line, the engine's message), a missing model is
FileNotFoundError, and a KeyboardInterrupt during generate leaves a usable LLM with its KV
slots back."""
import numbers
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import CTX, ROOT, SEED_PROMPTS, assert_idle
from lite_llama import LLM, SamplingParams


@pytest.mark.parametrize("kwargs, word", [
    ({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"), ({"top_k": -2}, "top_k"),
    ({"min_p": 2}, "min_p"), ({"max_tokens": 0}, "max_tokens"), ({"n": 0}, "n"),
    ({"logprobs": 21}, "logprobs"), ({"presence_penalty": 3}, "presence_penalty"),
    ({"repetition_penalty": 0}, "repetition_penalty"), ({"seed": -1}, "seed"),
    ({"stop": [""]}, "stop"), ({"temperature": "hot"}, "temperature"),
])
def test_bad_sampling_params(kwargs, word):
    with pytest.raises(ValueError, match=word) as e:
        SamplingParams(**kwargs)
    assert "\n" not in str(e.value)


def one_line_value_error(word, f):
    """f() raises a one-line ValueError naming ``word`` (not pybind11's multi-line TypeError, a
    cast RuntimeError, or a CLI flag's name)."""
    with pytest.raises(ValueError, match=word) as e:
        f()
    assert "\n" not in str(e.value) and "--" not in str(e.value) and "pybind11" not in str(e.value)
    return str(e.value)


# Wrong types and out-of-range ints are refused in Python, before they reach the native module,
# and nothing is silently reinterpreted (a string as a list of characters, "no" as True).
@pytest.mark.parametrize("kwargs, word", [
    ({"top_k": 2**40}, "top_k"), ({"n": 2**0.5}, "n"), ({"n": 2**31}, "n"), ({"logprobs": 2**70}, "logprobs"),
    ({"max_tokens": 2**40}, "max_tokens .*2147483647"), ({"max_tokens": 2**31}, "max_tokens"),
    ({"stop_token_ids": [2**70]}, "stop_token_ids"), ({"stop_token_ids": [-1]}, "stop_token_ids"),
    ({"stop_token_ids": [2**31]}, "stop_token_ids"), ({"stop_token_ids": 5}, "stop_token_ids"),
    ({"stop_token_ids": ["1"]}, "stop_token_ids"), ({"stop_token_ids": [True]}, "stop_token_ids"),
    ({"logit_bias": {2**70: 1.0}}, "logit_bias"), ({"logit_bias": {-1: 1.0}}, "logit_bias"),
    ({"logit_bias": [1, 2]}, "logit_bias"), ({"logit_bias": {"1": 1.0}}, "logit_bias"),
    ({"logit_bias": {1: "x"}}, "logit_bias"), ({"logit_bias": {1: 10**400}}, "logit_bias"),
    ({"choice": [1]}, "choice"), ({"choice": "abc"}, "choice"), ({"choice": 5}, "choice"),
    ({"choice": ["a\ud800"]}, "choice"), ({"grammar": 5}, "grammar"), ({"regex": 5}, "regex"),
    ({"json_schema": {"type": object()}}, "json_schema"), ({"json_schema": 5}, "json.schema"),
    ({"stop": 5}, "stop"), ({"stop": [1]}, "stop"), ({"stop": b"x"}, "stop"),
    ({"stop": "\ud800"}, "stop"), ({"ignore_eos": "no"}, "ignore_eos"), ({"ignore_eos": 1}, "ignore_eos"),
    ({"seed": "1"}, "seed"), ({"seed": 2**64}, "seed"), ({"seed": 2**70}, "seed"), ({"temperature": 10**400}, "temperature"),
    # past float32's range: named with the value given, not as the engine's inf
    ({"temperature": 1e40}, r"^temperature .*got 1e\+40$"), ({"top_p": -1e39}, r"^top_p .*got -1e\+39$"),
    ({"logit_bias": {1: 1e39}}, r"^logit_bias .*got 1e\+39$"), ({"choice": []}, r"^choice must list"),
    ({"choice": ()}, r"^choice must list .*got \(\)$"),
])
def test_bad_sampling_param_types(kwargs, word):
    one_line_value_error(word, lambda: SamplingParams(**kwargs))


class _Int:
    """A stand-in for numpy's integer scalars: not an int subclass, registered as numbers.Integral."""

    def __init__(self, v):
        self.v = v

    def __int__(self):
        return self.v

    __index__ = __int__

    def __repr__(self):
        return f"_Int({self.v})"


class _Float:
    """A stand-in for np.float32: not a float subclass, registered as numbers.Real."""

    def __init__(self, v):
        self.v = v

    def __float__(self):
        return self.v

    def __repr__(self):
        return f"_Float({self.v})"


numbers.Integral.register(_Int)
numbers.Real.register(_Float)


def test_numpy_like_scalars_accepted():
    # np.float32(0.5) and np.int64(3) were refused as "must be a number" / "must be an integer"
    core = SamplingParams(temperature=_Float(0.5), top_k=_Int(3), max_tokens=_Float(8.0), n=_Int(2),
                          logit_bias={_Int(5): _Float(1.5)}, stop_token_ids=[_Int(7)])._to_core()
    assert (core.temperature, core.top_k, core.max_tokens) == (0.5, 3, 8)
    assert core.logit_bias == [(5, 1.5)] and core.stop_token_ids == [7]
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=_Float(8.5))
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=1j)


def test_numpy_like_token_id_decodes(llm):
    tok = llm.get_tokenizer()
    assert tok.decode(_Int(42)) == tok.decode(42) == tok.decode([_Int(42)])


def test_sampling_param_edges_still_accepted():
    # float32's largest value, as usually printed, rounds to it (not to inf): accepted, and the
    # range check that follows names the range
    with pytest.raises(ValueError, match=r"temperature must be in \[0, 100\]"):
        SamplingParams(temperature=3.4028235e38)
    assert SamplingParams(top_k=-1)._to_core().top_k == 0
    assert SamplingParams(max_tokens=2**31 - 1, n=2.0, top_k=2**31 - 1)._to_core().max_tokens == 2**31 - 1
    assert SamplingParams(max_tokens=None)._to_core().max_tokens == 2**31 - 1
    assert SamplingParams(seed=2**64 - 1)._to_core().seed == 2**64 - 1
    assert SamplingParams(seed=2**64 - 1)._to_core(seed=2**64).seed == 0  # choice 1's seed + 1 wraps
    assert SamplingParams(stop_token_ids=(0, 2**31 - 1))._to_core().stop_token_ids == [0, 2**31 - 1]
    assert SamplingParams(stop="a")._to_core().stop == ["a"]
    assert SamplingParams(stop=("a", "b"), ignore_eos=True)._to_core().ignore_eos is True
    assert SamplingParams(logit_bias={}, choice=("x", "y"))._to_core().grammar
    assert SamplingParams(json_schema='{"type": "integer"}')._to_core().grammar


@pytest.mark.parametrize("kwargs, word", [
    ({"ctx": 2**40}, "ctx"), ({"ctx": 2**31}, "ctx"), ({"seed": 2**70}, "seed"), ({"seed": 2**64}, "seed"),
    ({"threads": 10**6}, "threads"), ({"threads": 1025}, "threads"), ({"threads": "2"}, "threads"),
    ({"max_num_seqs": 10**6}, "max_num_seqs"), ({"max_num_batched_tokens": 2**40}, "max_num_batched_tokens"),
    ({"kv_tokens": 2**70}, "kv_tokens"), ({"enforce_eager": "no"}, "enforce_eager"),
    ({"enable_prefix_caching": "yes"}, "enable_prefix_caching"), ({"device": ["cpu"]}, "device"),
    ({"gpu_memory_utilization": True}, "gpu_memory_utilization"), ({"model": 5}, "model"),
    ({"model": "\ud800.gguf"}, "model"), ({"tensor_parallel_size": 2**70}, "tensor_parallel_size"),
])
def test_bad_llm_argument_types(kwargs, word):
    kwargs = {"model": "default", **kwargs}
    one_line_value_error(word, lambda: LLM(kwargs.pop("model"), **kwargs))


@pytest.mark.parametrize("call, word", [
    (lambda llm: llm.generate([[2**40]], use_tqdm=False), "prompt"),
    (lambda llm: llm.generate([[1, -1]], use_tqdm=False), "prompt"),
    (lambda llm: llm.generate({"prompt_token_ids": [2**70]}, use_tqdm=False), "prompt_token_ids"),
    (lambda llm: llm.generate("a\ud800", use_tqdm=False), "prompt"),
    (lambda llm: llm.generate(["ok", {"prompt": "\udfff"}], use_tqdm=False), "prompt"),
    (lambda llm: llm.chat([{"role": "user", "content": "\ud800"}], use_tqdm=False), "content"),
    (lambda llm: llm.chat([{"role": "user", "content": "hi"}], use_tqdm=False,
                          add_generation_prompt="yes"), "add_generation_prompt"),
    (lambda llm: llm.generate("hi", 5, use_tqdm=False), "sampling_params"),
    (lambda llm: llm.chat(5, use_tqdm=False), "messages"),
    (lambda llm: llm.score([1, 2**40]), "score"),
    (lambda llm: llm.score("\ud800 text"), "text"),
    (lambda llm: llm.get_tokenizer().decode([2**70]), "ids"),
    (lambda llm: llm.get_tokenizer().decode(2**70), "ids"),
    (lambda llm: llm.get_tokenizer().decode([-1]), "ids"),
    (lambda llm: llm.get_tokenizer().decode([1], skip_special_tokens="no"), "skip_special_tokens"),
    (lambda llm: llm.get_tokenizer().encode("\ud800"), "text"),
    (lambda llm: llm.get_tokenizer().encode("hi", add_special_tokens="no"), "add_special_tokens"),
    # stop_token_ids are token ids of this model (as logit_bias): checked against its vocabulary.
    (lambda llm: llm.generate("hi", SamplingParams(stop_token_ids=[10**9]), use_tqdm=False),
     "stop_token_ids"),
    (lambda llm: llm.generate("hi", SamplingParams(stop_token_ids=[llm.get_tokenizer().vocab_size]),
                              use_tqdm=False), "stop_token_ids"),
    (lambda llm: next(llm.generate_stream("hi", SamplingParams(stop_token_ids=[10**9]))), "stop_token_ids"),
])
def test_bad_call_argument_types(llm, call, word):
    one_line_value_error(word, lambda: call(llm))
    assert_idle(llm)


def test_bad_generate_arguments(llm):
    greedy = SamplingParams(temperature=0, max_tokens=4)
    with pytest.raises(ValueError, match="empty"):
        llm.generate({"prompt_token_ids": []}, greedy)
    with pytest.raises(ValueError, match="longer than the context"):
        llm.generate({"prompt_token_ids": [1] * (CTX + 1)}, greedy)
    with pytest.raises(ValueError, match="fills the context of 1024 tokens .*: no room for a new token"):
        llm.generate({"prompt_token_ids": [1] * CTX}, greedy)
    with pytest.raises(ValueError, match="out of range"):
        llm.generate([[1, 2, 10**8]], greedy)
    with pytest.raises(ValueError, match="one per prompt"):
        llm.generate(["a", "b"], [greedy])
    with pytest.raises(ValueError):
        llm.generate(42, greedy)
    with pytest.raises(ValueError, match="role"):
        llm.chat([{"role": "wizard", "content": "hi"}], greedy)
    sp = SamplingParams()
    sp.temperature = -3  # changed after construction: checked again when used
    with pytest.raises(ValueError, match="temperature"):
        llm.generate("hello", sp)
    # A bad prompt after good ones: those were cancelled, nothing is left behind.
    with pytest.raises(ValueError):
        llm.generate(["fine", "also fine", {"prompt_token_ids": [1] * CTX}], greedy)
    assert_idle(llm)
    with pytest.raises(ValueError, match="out of range"):
        llm.get_tokenizer().decode([10**8])


def test_bad_llm_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        LLM(str(tmp_path / "nope.gguf"))
    for kwargs in ({"device": "tpu"}, {"dtype": "float64"}, {"quantize": "int3"},
                   {"kv_tokens": -1}, {"gpu_memory_utilization": 2}, {"tensor_parallel_size": 0},
                   {"tensor_parallel_size": True}):
        with pytest.raises(ValueError):
            LLM("default", **kwargs)
    # Set-up errors the engine finds name the Python argument, not the CLI flag (--tp, --ctx).
    for kwargs, words in (({"device": "cpu", "tensor_parallel_size": 2}, ("tensor_parallel_size 2", "9 attention heads")),
                          ({"ctx": 2**31 - 1}, ("ctx 2147483647", "context length")),
                          ({"kv_tokens": 2**62}, ("kv_tokens",)), ({"kv_tokens": 1}, ("kv_tokens", "at least 2")),
                          ({"kv_tokens": 2**31 - 1}, ("kv_tokens 2147483647", "GiB of host memory and swap")),
                          ({"ctx": 1}, ("ctx", "at least 2"))):
        with pytest.raises(ValueError) as e:
            LLM("default", **kwargs)
        assert all(w in str(e.value) for w in words) and "--" not in str(e.value), str(e.value)
        assert "\n" not in str(e.value)
    fake = tmp_path / "m.gguf"  # random weights take an HF config's shapes, not a GGUF file's
    fake.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ValueError, match="load_format dummy needs a config.json .*GGUF") as e:
        LLM(str(fake), load_format="dummy")
    assert "\n" not in str(e.value)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file")
    with pytest.raises(RuntimeError, match="bad.gguf") as e:
        LLM(str(bad))
    assert "\n" not in str(e.value)


LONG = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)


def check_recovers(llm):
    assert_idle(llm)
    want = llm.generate(SEED_PROMPTS[0], SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)
    assert want[0].outputs[0].finish_reason == "length" and len(want[0].outputs[0].token_ids) == 8
    assert_idle(llm)


def test_keyboard_interrupt_from_progress_callback(llm):
    class InterruptingBar:
        def __init__(self, **kwargs):
            pass

        def update(self, n):
            raise KeyboardInterrupt

        def close(self):
            pass

    # The short prompt finishes first; its progress update interrupts the long ones.
    params = [SamplingParams(temperature=0, max_tokens=2)] + [LONG] * 7
    with pytest.raises(KeyboardInterrupt):
        llm.generate(SEED_PROMPTS * 2, params, use_tqdm=InterruptingBar)
    check_recovers(llm)


def interrupted(work):
    """Seconds until `work()` raised KeyboardInterrupt from a SIGINT sent 0.5 s into it. Python
    leaves SIGINT alone when it starts with SIGINT ignored (a job a non-interactive shell put in
    the background): the usual handler is installed meanwhile. The signal comes from another
    process, so no Python thread has to get the GIL to send it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    killer = subprocess.Popen(["sh", "-c", f"sleep 0.5; kill -INT {os.getpid()}"])
    t0 = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            work()
    finally:
        killer.kill()
        killer.wait()
        signal.signal(signal.SIGINT, previous)
    return time.perf_counter() - t0


def test_keyboard_interrupt_from_sigint(llm):
    # A minute's work on 2 cores.
    assert interrupted(lambda: llm.generate(SEED_PROMPTS * 4, LONG, use_tqdm=False)) < 10
    check_recovers(llm)


def test_keyboard_interrupt_during_score():
    # score() ran to its end before Python saw the signal (28.6 s for this text on 2 cores).
    llm = LLM("default", device="cpu", threads=2, ctx=8192, kv_tokens=8192)
    assert interrupted(lambda: llm.score("hello world " * 3000)) < 8
    check_recovers(llm)


def test_reentrant_call_is_refused(llm):
    class ReentrantBar:
        def __init__(self, **kwargs):
            pass

        def update(self, n):
            llm.generate("again", SamplingParams(max_tokens=2), use_tqdm=False)

        def close(self):
            pass

    with pytest.raises(RuntimeError, match="busy"):
        llm.generate(SEED_PROMPTS, SamplingParams(temperature=0, max_tokens=4), use_tqdm=ReentrantBar)
    check_recovers(llm)


def assert_exits_cleanly(script, timeout):
    """Runs `script` in a fresh interpreter: it must print 'main thread exits' and exit 0."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=ROOT)
    assert r.returncode == 0 and "main thread exits" in r.stdout, (r.returncode, r.stderr[-2000:])


@pytest.mark.parametrize("call", ["generate_stream", "generate"])
def test_exit_with_a_daemon_thread_generating(call):
    """The interpreter exits while a daemon thread generates: CPython ends such a thread with
    pthread_exit, whose unwinding through the engine's C++ frames aborted the process
    ('terminate called without an active exception', rc 134)."""
    script = f"""
import sys, threading, time
from lite_llama import LLM, SamplingParams
llm = LLM("default", device="cpu", threads=2, ctx=256, kv_tokens=512)
p = SamplingParams(max_tokens=None, ignore_eos=True)
def work():
    while True:
        if "{call}" == "generate_stream":
            for _ in llm.generate_stream("Once upon a time", p):
                pass
        else:
            llm.generate("Once upon a time", p, use_tqdm=False)
threading.Thread(target=work, daemon=True).start()
time.sleep(1.0)
print("main thread exits", flush=True)
"""
    assert_exits_cleanly(script, timeout=120)


def test_exit_with_a_stream_left_open():
    """A script ends with a started generate_stream in a variable: the interpreter closes it while
    it exits, on the main thread, which cancels the request. That thread parked there as if it were
    a daemon thread (above), and the exit hung for ever."""
    script = """
from lite_llama import LLM, SamplingParams
llm = LLM("default", device="cpu", threads=2, ctx=256, kv_tokens=512)
stream = llm.generate_stream("Once upon a time", SamplingParams(max_tokens=50, ignore_eos=True))
next(stream)
print("main thread exits", flush=True)
"""
    assert_exits_cleanly(script, timeout=60)
