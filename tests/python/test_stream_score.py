"""Streaming, scoring and the tokenizer."""
import threading
import time

from conftest import ROOT, SEED_PROMPTS, assert_idle, run_cli
from lite_llama import SamplingParams


def test_stream_deltas_concatenate_to_the_text(llm):
    sp = SamplingParams(temperature=0, max_tokens=24)
    full = llm.generate(SEED_PROMPTS[2], sp, use_tqdm=False)[0].outputs[0].text
    deltas = list(llm.generate_stream(SEED_PROMPTS[2], sp))
    assert len(deltas) > 5 and all(deltas)
    assert "".join(deltas) == full
    assert_idle(llm)
    # With a stop string the stream holds back what might start it, and never shows it.
    stop = full.split()[3]
    deltas = list(llm.generate_stream(SEED_PROMPTS[2], SamplingParams(temperature=0, max_tokens=24, stop=stop)))
    assert "".join(deltas) == full[:full.index(stop)]


def test_stream_closed_early_cancels(llm):
    stream = llm.generate_stream("Tell me a long story.", SamplingParams(max_tokens=200, ignore_eos=True))
    for i, _ in enumerate(stream):
        if i == 2:
            assert llm.get_stats()["running"] == 1
            break
    stream.close()
    assert_idle(llm)
    chat = "".join(llm.chat_stream([{"role": "user", "content": "Hi!"}], SamplingParams(temperature=0, max_tokens=8)))
    assert chat == llm.chat([{"role": "user", "content": "Hi!"}], SamplingParams(temperature=0, max_tokens=8),
                            use_tqdm=False)[0].outputs[0].text


def test_perplexity_equals_cli(llm):
    path = ROOT / "bench" / "texts" / "english.txt"
    text = path.read_text()[:600]
    tmp = ROOT / "build" / "python_test_score.txt"
    tmp.write_text(text)
    try:
        cli = run_cli("score", "--text", str(tmp), "--full")
    finally:
        tmp.unlink()
    out = llm.score(text)
    seq = cli["sequences"][0]
    assert len(out.token_ids) == seq["tokens"]
    assert out.argmax == seq["argmax"]
    assert abs(out.nll - cli["nll"]) < 1e-12
    assert abs(llm.perplexity(text) - cli["ppl"]) < 1e-9


def test_tokenizer(llm):
    tok = llm.get_tokenizer()
    cli = run_cli("tokenize", "--json", SEED_PROMPTS[3])
    ids = tok.encode(SEED_PROMPTS[3])
    assert ids == cli["tokens"]
    assert tok.decode(ids) == SEED_PROMPTS[3]
    im = tok.encode("<|im_start|>user\nHi<|im_end|>", add_special_tokens=False)
    assert len(im) == 5
    assert tok.decode(im) == "<|im_start|>user\nHi<|im_end|>"
    assert tok.decode(im, skip_special_tokens=True) == "user\nHi"
    llama = tok.encode("🦙", add_special_tokens=False)
    assert len(llama) > 1 and tok.decode(llama) == "🦙"
    assert "\ufffd" in tok.decode(llama[:1])  # a partial character, not a UnicodeDecodeError
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert text.startswith("<|im_start|>") and text.endswith("<|im_start|>assistant\n")
    ids = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=True)
    assert tok.decode(ids) == text


def test_gil_is_released_while_generating(llm):
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    t0 = time.perf_counter()
    llm.generate(SEED_PROMPTS, SamplingParams(temperature=0, max_tokens=16, ignore_eos=True), use_tqdm=False)
    elapsed = time.perf_counter() - t0
    stop.set()
    t.join()
    # A thread that needs the GIL kept running (with the GIL held it would make none): at least
    # a twentieth of the ticks it could make, so that a busy machine does not fail it.
    assert ticks > elapsed * 1000 / 20, (ticks, elapsed)


def test_tokenizer_tokens_equal_hf(llm):
    """convert_ids_to_tokens / convert_tokens_to_ids and the special tokens' strings, as HF's
    tokenizer of the default model (SmolLM2: the fixture's tokenizer.json and its config)."""
    import json

    from tokenizers import Tokenizer
    src = ROOT / "tests" / "fixtures" / "hf_tokenizers" / "smollm2"
    hf = Tokenizer.from_file(str(src / "tokenizer.json"))
    config = json.loads((src / "tokenizer_config.json").read_text())
    tok = llm.get_tokenizer()
    ids = hf.encode("<|im_start|>user\nHéllo 🦙  world<|im_end|>").ids
    pieces = [hf.id_to_token(i) for i in ids]
    assert tok.convert_ids_to_tokens(ids) == pieces
    assert tok.convert_ids_to_tokens(ids[1]) == pieces[1]
    assert tok.convert_ids_to_tokens(ids, skip_special_tokens=True) == pieces[1:-1]
    assert tok.convert_tokens_to_ids(pieces) == ids
    assert tok.convert_tokens_to_ids("<|im_end|>") == hf.token_to_id("<|im_end|>")
    for name in ("bos", "eos", "pad"):
        assert getattr(tok, name + "_token") == config[name + "_token"]
        assert getattr(tok, name + "_token_id") == hf.token_to_id(config[name + "_token"])
