"""What LLM.generate / chat / score return (vLLM's shapes)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union


@dataclass
class Logprob:
    """One token's log-probability; ``rank`` is 1 for the most likely token. The chosen token
    always has one, listed among the best or not: 1 + the vocabulary tokens with a strictly
    higher logprob (as vLLM)."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


# Per generated token: token id -> Logprob, the chosen token first, then the best alternatives.
SampleLogprobs = List[Dict[int, Logprob]]
# Per prompt token: None for the first, then token id -> Logprob: the prompt token and the best
# alternatives at its position.
PromptLogprobs = List[Optional[Dict[int, Logprob]]]


@dataclass
class CompletionOutput:
    """One completion of a prompt."""

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[SampleLogprobs]
    finish_reason: Optional[str]  # "stop" (EOS, stop string or stop token id) or "length"
    stop_reason: Union[int, str, None] = None  # the stop string or stop token id that ended it

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """Everything one prompt produced: its ``n`` completions in ``outputs``."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool = True
    prompt_logprobs: Optional[PromptLogprobs] = None
    num_cached_tokens: int = 0


@dataclass
class ScoreOutput:
    """Teacher-forced scoring of one sequence (``lite-llama score``): position i predicts
    token i + 1."""

    token_ids: List[int]
    logprobs: List[float] = field(repr=False)  # log p(token[i + 1] | tokens[..i]), n - 1 values
    argmax: List[int] = field(repr=False)  # the model's top-1 next token at each position
    nll: float = 0.0  # mean negative log-likelihood per scored token
    perplexity: float = 0.0  # exp(nll)
