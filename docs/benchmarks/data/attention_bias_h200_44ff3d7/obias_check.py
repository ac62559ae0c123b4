"""GPU check of the o_proj bias (attention_bias): the tiny llama fixture with q/k/v/o biases added,
scored by lite-llama on cuda and cpu against transformers (fp32) on the same tokens."""
import json, os, shutil, subprocess, sys
import numpy as np, torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

src, dst, cli, out = sys.argv[1], "/tmp/ob_model", sys.argv[2], sys.argv[3]
shutil.rmtree(dst, ignore_errors=True)
os.makedirs(dst)
g = torch.Generator().manual_seed(0)
if src == "new":  # head dim 64, which the CUDA kernels take (the fixture's is 16)
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    c = LlamaConfig(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=64, num_hidden_layers=2, vocab_size=512, max_position_embeddings=512,
                    attention_bias=True, tie_word_embeddings=False)
    LlamaForCausalLM(c).to(torch.bfloat16).save_pretrained(dst)
    src = dst
cfg = json.load(open(f"{src}/config.json"))
cfg["attention_bias"] = True
tensors = {}
for f in sorted(os.listdir(src)):
    if f.endswith(".safetensors"):
        tensors.update(load_file(f"{src}/{f}"))
for f in os.listdir(dst):
    os.remove(f"{dst}/{f}")
json.dump(cfg, open(f"{dst}/config.json", "w"))
H, D, Hq, Hkv = cfg["hidden_size"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
for l in range(cfg["num_hidden_layers"]):
    for n, size in (("q", Hq * D), ("k", Hkv * D), ("v", Hkv * D), ("o", H)):
        tensors[f"model.layers.{l}.self_attn.{n}_proj.bias"] = (torch.randn(size, generator=g) * 0.5).to(torch.bfloat16)
save_file({k: v.contiguous() for k, v in tensors.items()}, f"{dst}/model.safetensors")
ids = [int(x) for x in torch.randint(0, cfg["vocab_size"], (48,), generator=g)]
json.dump([ids], open("/tmp/ob_tokens.json", "w"))
m = AutoModelForCausalLM.from_pretrained(dst, torch_dtype=torch.float32).eval()
with torch.no_grad():
    lp = torch.log_softmax(m(torch.tensor([ids])).logits[0].double(), -1)
ref = np.array([lp[i, ids[i + 1]].item() for i in range(len(ids) - 1)])
res = {"hf_nll": float(-ref.mean())}
for dev in ("cuda", "cpu"):
    r = subprocess.run([cli, "score", "-q", "-m", dst, "--device", dev, "--tokens", "/tmp/ob_tokens.json", "--full"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        res[dev] = r.stderr.strip()
        continue
    got = np.array(json.loads(r.stdout)["sequences"][0]["logprobs"])
    res[dev] = {"nll": float(-got.mean()), "max_abs_diff_vs_hf": float(np.abs(got - ref).max())}
# Without the o bias (as before the fix) for scale: drop o_proj.bias from a copy.
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res))
