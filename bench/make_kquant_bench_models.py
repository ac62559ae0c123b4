#!/usr/bin/env python3
"""Random SmolLM2-sized Llama GGUFs in K-quants, for CPU decode speed (not for accuracy).

SmolLM2-135M's hidden size 576 is not a multiple of 256, so llama.cpp quantizes most of its
tensors to Q5_0/Q5_1/Q8_0 even when asked for a K-quant mix (see docs/benchmarks/quantization.md).
This writes the same shape with hidden size 512 (30 layers, FFN 1536, 8 heads / 4 KV heads of
64, SmolLM2's 49,152-token tokenizer, tied embeddings: 129M parameters), random weights, as an
F16 GGUF with the gguf package, and quantizes it with llama.cpp (llama-cpp-python, run under a
second Python) to Q4_K_M, Q5_K_M and Q6_K, plus Q4_1 as the default model's type for reference.

usage: /opt/fixenv/bin/python bench/make_kquant_bench_models.py OUT_DIR
           [--llamacpp-python /opt/llamacpp/bin/python] [--smollm models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import argparse
import os
import subprocess

import gguf
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H, F, L, HEADS, KV, HD = 512, 1536, 30, 8, 4, 64
FTYPES = {"Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18, "Q4_1": 3}
QUANTIZE = """
import sys, llama_cpp
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = int(sys.argv[3]); p.allow_requantize = True; p.nthread = 2
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), p))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--llamacpp-python", default="/opt/llamacpp/bin/python")
    ap.add_argument("--smollm", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    r = gguf.GGUFReader(a.smollm)
    f = lambda k: r.fields[k].contents()
    tokens = f("tokenizer.ggml.tokens")
    src = os.path.join(a.out, "bench-llama-512.F16.gguf")
    w = gguf.GGUFWriter(src, "llama")
    w.add_name("lite-llama K-quant bench model (random)")
    w.add_block_count(L)
    w.add_context_length(8192)
    w.add_embedding_length(H)
    w.add_feed_forward_length(F)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(100000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(HD)
    w.add_vocab_size(len(tokens))
    w.add_file_type(1)  # mostly F16
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(f("tokenizer.ggml.token_type"))
    w.add_token_merges(f("tokenizer.ggml.merges"))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    rng = np.random.default_rng(0)
    mat = lambda rows, cols: (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)
    w.add_tensor("token_embd.weight", mat(len(tokens), H))
    w.add_tensor("output_norm.weight", np.ones(H, np.float32))
    for i in range(L):
        b = "blk.%d." % i
        w.add_tensor(b + "attn_norm.weight", np.ones(H, np.float32))
        w.add_tensor(b + "ffn_norm.weight", np.ones(H, np.float32))
        w.add_tensor(b + "attn_q.weight", mat(H, H))
        w.add_tensor(b + "attn_k.weight", mat(KV * HD, H))
        w.add_tensor(b + "attn_v.weight", mat(KV * HD, H))
        w.add_tensor(b + "attn_output.weight", mat(H, H))
        w.add_tensor(b + "ffn_gate.weight", mat(F, H))
        w.add_tensor(b + "ffn_up.weight", mat(F, H))
        w.add_tensor(b + "ffn_down.weight", mat(H, F))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for name, ft in FTYPES.items():
        dst = os.path.join(a.out, "bench-llama-512.%s.gguf" % name)
        subprocess.run([a.llamacpp_python, "-c", QUANTIZE, src, dst, str(ft)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        counts = {}
        for t in gguf.GGUFReader(dst).tensors:
            counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
        print(dst, "%.1f MB" % (os.path.getsize(dst) / 1e6), dict(sorted(counts.items())))


if __name__ == "__main__":
    main()
