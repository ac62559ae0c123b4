"""The CLI's answers to careless input: a value out of range or of the wrong kind is a one-line
error and exit status 2, never a silent clamp or truncation, and a generation that ends in an
error fails the command after its partial output."""
import json
import os
import re
import subprocess

import pytest

from conftest import BIN, COMMON_ARGS


def run(*args, timeout=300):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=timeout)


def one_line_error(p, needle):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], p.stderr


@pytest.mark.parametrize("seed", ["99999999999999999999999", "18446744073709551616", "-5", "1.5", "0x10"])
def test_seed_out_of_range_is_an_error(seed):
    one_line_error(run("generate", *COMMON_ARGS, "-p", "hi", "-n", "2", "-q", "--seed", seed), "--seed")


def test_largest_seed_is_taken():
    outs = [run("generate", *COMMON_ARGS, "-p", "hi", "-n", "6", "--temp", "1", "-q", "--seed", s)
            for s in ("18446744073709551615", "18446744073709551615", "9223372036854775807")]
    assert all(p.returncode == 0 for p in outs), [p.stderr for p in outs]
    assert outs[0].stdout == outs[1].stdout  # the same seed, the same draw


@pytest.mark.parametrize("ids", ["[[1.5, 2]]", "[[1, -3]]", "[[4294967297]]", '[["a"]]', "[[true]]"])
def test_score_token_ids_must_be_integers(tmp_path, ids):
    f = tmp_path / "tokens.json"
    f.write_text(ids)
    one_line_error(run("score", *COMMON_ARGS, "--tokens", str(f), "-q"), "--tokens")


def test_generation_error_fails_the_command():
    # A regex of nested repetitions (exponentially ambiguous): refused up front, or followed to
    # the end; never a partial answer with finish_reason "error" and exit status 0.
    rx = "(.{0,99}){0,99}"
    p = run("generate", *COMMON_ARGS, "--chat", "-p", "x", "-n", "12", "--temp", "0", "--regex", rx, "--json", "-q")
    if p.returncode == 0:
        out = json.loads(p.stdout)
        assert out["finish_reason"] != "error", out
        assert re.fullmatch(rx, out["text"], re.S), out
    else:
        one_line_error(p, "")


def test_unknown_command_is_named():
    one_line_error(run("frobnicate"), "unknown command 'frobnicate'")


@pytest.mark.parametrize("lens", [("2147483640", "8"), ("2147483647", "2147483647"), ("8", "4294967296")])
def test_bench_lengths_do_not_wrap(lens):
    p = run("bench", *COMMON_ARGS, "-q", "--batch", "1", "--runs", "1", "--warmup", "0",
            "--prompt-len", lens[0], "--gen-len", lens[1])
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stdout == "" and p.stderr.startswith("error:") and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_bench_refuses_a_context_that_ends_generation_early():
    # 60 + 32 tokens in a context of 64: each sequence stops after 4 tokens, and the decode rate
    # counted 32 (724 "tok/s" for a 100 tok/s decode).
    one_line_error(run("bench", *COMMON_ARGS, "-q", "--batch", "1", "--runs", "1", "--warmup", "0",
                       "--prompt-len", "60", "--gen-len", "32", "--ctx", "64"), "exceed the context of 64")


@pytest.mark.parametrize("cmd, flag", [("generate", "--file"), ("generate", "--grammar"),
                                       ("generate", "--json-schema"), ("score", "--text"), ("score", "--tokens")])
def test_a_directory_for_a_file_is_named(tmp_path, cmd, flag):
    # --file read no lines from it ("no prompt given"), --grammar leaked a C++ stream message.
    extra = ["-p", "hi", "-n", "2"] if cmd == "generate" and flag != "--file" else []
    one_line_error(run(cmd, *COMMON_ARGS, "-q", *extra, flag, str(tmp_path)), f"{flag}: '{tmp_path}' is a directory")


def test_empty_grammar_file_is_an_error(tmp_path):
    f = tmp_path / "empty.gbnf"
    f.write_text("")
    one_line_error(run("generate", *COMMON_ARGS, "-q", "-p", "hi", "-n", "2", "--grammar", str(f)), "--grammar")


def test_lost_output_fails_the_command():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        p = subprocess.run([str(BIN), "generate", *COMMON_ARGS, "-q", "-p", "Hello", "-n", "2", "--json"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 2 and "writing the output failed" in p.stderr, (p.returncode, p.stderr)


def test_prompt_file_with_crlf_line_ends(tmp_path):
    lf, crlf = tmp_path / "lf.txt", tmp_path / "crlf.txt"
    lf.write_bytes(b"Hello\nThe capital of France is\n")
    crlf.write_bytes(b"Hello\r\nThe capital of France is\r\n")
    outs = [run("generate", *COMMON_ARGS, "-q", "--file", str(f), "-n", "4", "--temp", "0", "--json") for f in (lf, crlf)]
    assert all(p.returncode == 0 for p in outs), [p.stderr for p in outs]
    texts = [[(r["prompt_tokens"], r["text"]) for r in json.loads(p.stdout)["results"]] for p in outs]
    assert texts[0] == texts[1], texts


def test_min_tokens_flag():
    p = run("generate", *COMMON_ARGS, "-q", "--chat", "-p", "Say hi", "-n", "60", "--temp", "0", "--json")
    q = run("generate", *COMMON_ARGS, "-q", "--chat", "-p", "Say hi", "-n", "60", "--temp", "0", "--json",
            "--min-tokens", "40")
    assert p.returncode == 0 and q.returncode == 0, (p.stderr, q.stderr)
    assert json.loads(p.stdout)["completion_tokens"] < 40 <= json.loads(q.stdout)["completion_tokens"]
    one_line_error(run("generate", *COMMON_ARGS, "-q", "-p", "hi", "-n", "10", "--min-tokens", "20"), "min_tokens")


def test_top_k_minus_one_is_off():
    # -1 disables top-k on the server and in Python (vLLM's spelling); the CLI refused it.
    outs = [run("generate", *COMMON_ARGS, "-q", "-p", "Once upon a time", "-n", "8", "--temp", "1", "--seed", "3",
                "--top-k", k) for k in ("-1", "0")]
    assert all(p.returncode == 0 for p in outs), [p.stderr for p in outs]
    assert outs[0].stdout == outs[1].stdout
    one_line_error(run("generate", *COMMON_ARGS, "-q", "-p", "hi", "-n", "2", "--top-k", "-2"), "top_k")
