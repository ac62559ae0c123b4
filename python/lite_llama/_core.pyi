# Type stubs of the native module (python/src/module.cpp). Use the lite_llama package instead.
from typing import Any, Callable, Dict, List, Optional, Tuple

__version__: str
built_with_cuda: bool

class SamplingParams:
    temperature: float
    top_k: int
    top_p: float
    min_p: float
    repetition_penalty: float
    presence_penalty: float
    frequency_penalty: float
    seed: Optional[int]
    max_tokens: int
    stop: List[str]
    stop_token_ids: List[int]
    ignore_eos: bool
    top_logprobs: int
    prompt_logprobs: int
    grammar: str
    logit_bias: List[Tuple[int, float]]
    allowed_token_ids: Optional[List[int]]
    bad_words: List[str]
    def __init__(self) -> None: ...
    def validate(self) -> None: ...

def json_schema_grammar(schema: str) -> str: ...
def regex_grammar(regex: str) -> str: ...
def choice_grammar(choices: List[str]) -> str: ...
def check_grammar(grammar: str) -> None: ...

class ChatMessage:
    role: str
    content: str
    reasoning_content: str
    tool_calls: str
    tool_call_id: str
    def __init__(self, role: str, content: str, reasoning_content: str = "", tool_calls: str = "",
                 tool_call_id: str = "") -> None: ...

class TokenLogprobs:
    token: int
    logprob: float
    rank: int  # 1 + the vocabulary tokens with a strictly higher logprob
    top: List[Tuple[int, float]]

class Completion:
    token_ids: List[int]
    text: str
    logprobs: List[TokenLogprobs]
    prompt_logprobs: List[TokenLogprobs]
    finish_reason: str
    prompt_tokens: int
    cached_tokens: int

class StepOutput:
    id: int
    tokens: List[int]
    text: str
    logprobs: List[TokenLogprobs]
    prompt_logprobs: List[TokenLogprobs]
    finished: bool
    finish_reason: str
    cached_tokens: int
    error: str

class ScoreResult:
    logprobs: List[float]
    argmax: List[int]

class Engine:
    def __init__(self, **options: Any) -> None: ...
    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> List[int]: ...
    def detokenize(self, ids: List[int]) -> str: ...
    def token_text(self, id: int) -> str: ...
    def apply_chat_template(self, messages: List[ChatMessage], add_generation_prompt: bool,
                            extra_json: str = "", continue_final: bool = False,
                            chat_template: str = "") -> str: ...
    def generate(self, prompts: List[List[int]], params: List[SamplingParams],
                 progress: Optional[Callable[[List[int], int], None]] = None) -> List[Completion]: ...
    def add_request(self, prompt: List[int], params: SamplingParams) -> int: ...
    def step(self) -> List[StepOutput]: ...
    def abort(self, ids: List[int]) -> None: ...
    def has_unfinished(self) -> bool: ...
    def score(self, seqs: List[List[int]], decode_tail: int = 0) -> List[ScoreResult]: ...
    def info(self) -> Dict[str, Any]: ...
    def stats(self) -> Dict[str, int]: ...
