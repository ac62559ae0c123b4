"""`lite-llama chat` driven as a terminal user would: Ctrl-C (SIGINT) during an answer stops it
and returns to the prompt, the conversation going on; Ctrl-C at the prompt, or a second one
before the answer has stopped, ends the program with status 130. Before, the first Ctrl-C
killed the program mid-answer."""
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import BIN, COMMON_ARGS


class Chat:
    """The CLI in chat mode, stdout and stderr collected by threads."""

    def __init__(self):
        # --ignore-eos: an answer long enough to be interrupted.
        self.proc = subprocess.Popen([str(BIN), "chat", *COMMON_ARGS, "-n", "4000", "--ignore-eos"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out, self.err = bytearray(), bytearray()
        for stream, buf in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._pump, args=(stream, buf), daemon=True).start()

    @staticmethod
    def _pump(stream, buf):
        while chunk := stream.read1(4096):
            buf.extend(chunk)

    def wait_for(self, what, cond, timeout=120):
        end = time.monotonic() + timeout
        while not cond():
            assert self.proc.poll() is None, f"exited with {self.proc.returncode} waiting for {what}: {self.err.decode()}"
            assert time.monotonic() < end, f"timed out waiting for {what}: {self.err.decode()}"
            time.sleep(0.05)

    def prompts(self):
        return self.err.decode(errors="replace").count("> ")

    def say(self, text):
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def interrupt_answer(self, n_prompts):
        """Waits for the answer to stream, sends SIGINT, and waits for the next prompt."""
        start = len(self.out)
        self.wait_for("the answer", lambda: len(self.out) > start + 20)
        self.proc.send_signal(signal.SIGINT)
        self.wait_for("the prompt after the stopped answer", lambda: self.prompts() == n_prompts + 1)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def chat():
    c = Chat()
    c.wait_for("the first prompt", lambda: c.prompts() == 1)
    yield c
    c.close()


def test_ctrl_c_stops_the_answer_then_exits_at_the_prompt(chat):
    chat.say("Tell me a long story about a lighthouse.")
    chat.interrupt_answer(1)
    err = chat.err.decode()
    assert "[stopped]" in err, err
    n = int(re.findall(r"\[(\d+) tokens", err)[-1])
    assert 0 < n < 4000, err
    # The conversation goes on (the stopped answer stays in it): a second turn answers.
    chat.say("And then?")
    chat.interrupt_answer(2)
    assert chat.err.decode().count("[stopped]") == 2
    # Ctrl-C at the empty prompt: a clean exit, status 130 (128 + SIGINT, as llama-cli).
    chat.proc.send_signal(signal.SIGINT)
    assert chat.proc.wait(timeout=30) == 130, chat.err.decode()


def test_second_ctrl_c_during_an_answer_exits(chat):
    chat.say("Tell me a long story about a lighthouse.")
    chat.wait_for("the answer", lambda: len(chat.out) > 20)
    chat.proc.send_signal(signal.SIGINT)
    time.sleep(0.2)  # two signals sent at once may arrive as one
    chat.proc.send_signal(signal.SIGINT)  # before the answer stopped, or at the prompt after it
    assert chat.proc.wait(timeout=30) == 130, chat.err.decode()


def test_end_of_input_still_exits_zero(chat):
    chat.proc.stdin.close()
    assert chat.proc.wait(timeout=30) == 0, chat.err.decode()
