"""lite-llama for Python: ``from lite_llama import LLM, SamplingParams``.

The engine (continuous batching, KV cache, kernels) is the C++ library, linked into
``lite_llama._core``; Python only submits prompts and receives finished outputs.

    llm = LLM("default")                      # a .gguf file, an HF model directory, or "default"
    for out in llm.generate(["Hello, my name is"], SamplingParams(temperature=0, max_tokens=32)):
        print(out.outputs[0].text)
"""
from . import _core
from .llm import LLM
from .outputs import CompletionOutput, Logprob, RequestOutput, ScoreOutput
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

__version__ = _core.__version__
built_with_cuda: bool = _core.built_with_cuda

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob", "ScoreOutput",
           "Tokenizer", "__version__", "built_with_cuda"]
