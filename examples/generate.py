"""The seeds' four prompts through the Python API (run from the repository root, after
scripts/setup: PYTHONPATH=build/python python3 examples/generate.py, or after `pip install .`)."""
from lite_llama import LLM, SamplingParams

prompts = [
    "I believe the meaning of life is",
    "Simply put, the theory of relativity states that",
    "A brief message congratulating the team on the launch:\n\nHi everyone,\n\nI just",
    "Translate English to French:\n\nsea otter => loutre de mer\npeppermint => menthe poivrée\nplush girafe => girafe peluche\ncheese =>",
]
llm = LLM("default")  # a .gguf file, a Hugging Face model directory, or "default"
for out in llm.generate(prompts, SamplingParams(temperature=0, max_tokens=64)):
    print(f"--- {out.prompt!r}\n{out.outputs[0].text}")
