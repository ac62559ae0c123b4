"""Bad arguments are ValueError (one line, the engine's message), a missing model is
FileNotFoundError, and a KeyboardInterrupt during generate leaves a usable LLM with its KV
slots back."""
import os
import signal
import subprocess
import time

import pytest
from conftest import CTX, SEED_PROMPTS, assert_idle
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


def test_bad_generate_arguments(llm):
    greedy = SamplingParams(temperature=0, max_tokens=4)
    with pytest.raises(ValueError, match="empty"):
        llm.generate({"prompt_token_ids": []}, greedy)
    with pytest.raises(ValueError, match="longer than the context"):
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
    with pytest.raises(RuntimeError, match="9 attention heads") as e:  # 9 heads over 2 ranks
        LLM("default", device="cpu", tensor_parallel_size=2)
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


def test_keyboard_interrupt_from_sigint(llm):
    # Python leaves SIGINT alone when it starts with SIGINT ignored (a job a non-interactive
    # shell put in the background): install the usual handler for this test. The signal comes
    # from another process, so no Python thread has to get the GIL to send it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    killer = subprocess.Popen(["sh", "-c", f"sleep 0.5; kill -INT {os.getpid()}"])
    t0 = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            llm.generate(SEED_PROMPTS * 4, LONG, use_tqdm=False)  # a minute's work on 2 cores
    finally:
        killer.kill()
        killer.wait()
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - t0 < 10
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
