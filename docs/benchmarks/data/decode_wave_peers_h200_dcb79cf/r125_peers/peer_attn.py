"""Peer attention kernels on this GPU, timed as attention-bench times lite-llama's (same shapes,
same copy-bandwidth and GEMM-peak definitions, measured in this run): PyTorch SDPA backends
(flash = FlashAttention-2, cuDNN, memory-efficient), flash_attn / flashinfer where installed.
Prints one JSON line per case."""
import json, math, sys, time
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

dev = torch.device("cuda")
quick = "--quick" in sys.argv
def out(**kw): print(json.dumps(kw), flush=True)

info = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "device": torch.cuda.get_device_name(0)}
for mod in ("flash_attn", "flashinfer", "xformers"):
    try:
        m = __import__(mod); info[mod] = getattr(m, "__version__", "?")
    except Exception as e:
        info[mod] = None
out(kind="info", **info)

def events_ms(fn, reps):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts) // 2]

# copy: bytes read + written per second of a 2 GiB copy (attention-bench's definition)
a = torch.empty(2 << 30, dtype=torch.uint8, device=dev).fill_(1); b = torch.empty_like(a)
ms = events_ms(lambda: b.copy_(a), 10)
copy_gbs = 2 * a.numel() / ms / 1e6
del a, b
out(kind="copy", GBs=round(copy_gbs, 1))
n = 8192
x = torch.randn(n, n, dtype=torch.bfloat16, device=dev); w = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
ms = events_ms(lambda: x @ w, 10)
gemm = 2 * n ** 3 / ms / 1e9
del x, w
out(kind="gemm_bf16_8192", TFLOPs=round(gemm, 1))

Hq, Hkv = 32, 8
backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}

def sdpa_call(be, q, k, v, causal):
    with sdpa_kernel(backends[be]):
        try:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        except Exception:
            G = q.shape[1] // k.shape[1]
            return F.scaled_dot_product_attention(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1), is_causal=causal)

# prefill: one causal sequence of L tokens, bf16
for D in (64, 128):
    for L in ((8192,) if quick else (2048, 8192, 16384, 32768)):
        q = torch.randn(1, Hq, L, D, dtype=torch.bfloat16, device=dev)
        k = torch.randn(1, Hkv, L, D, dtype=torch.bfloat16, device=dev)
        v = torch.randn(1, Hkv, L, D, dtype=torch.bfloat16, device=dev)
        flops = 4.0 * D * Hq * (L * (L + 1) / 2)
        for be in backends:
            # GQA: expand K/V once, outside the timing, where the backend will not take 8 heads
            kk, vv = k, v
            try:
                with sdpa_kernel(backends[be]):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                gqa = "native"
            except Exception:
                kk, vv = k.repeat_interleave(Hq // Hkv, 1), v.repeat_interleave(Hq // Hkv, 1); gqa = "expanded"
            try:
                with sdpa_kernel(backends[be]):
                    f = (lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True, enable_gqa=True)) if gqa == "native" \
                        else (lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True))
                    ms = events_ms(f, 5)
                tf = flops / ms / 1e9
                out(kind="prefill", backend=be, gqa=gqa, D=D, tokens=L, ms=round(ms, 3), TFLOPs=round(tf, 1), of_gemm_peak=round(tf / gemm, 3))
            except Exception as e:
                out(kind="prefill", backend=be, D=D, tokens=L, error=str(e).splitlines()[0][:200])
            del kk, vv
        try:
            from flash_attn import flash_attn_func
            qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
            ms = events_ms(lambda: flash_attn_func(qt, kt, vt, causal=True), 5)
            tf = flops / ms / 1e9
            out(kind="prefill", backend="flash_attn_pkg", D=D, tokens=L, ms=round(ms, 3), TFLOPs=round(tf, 1), of_gemm_peak=round(tf / gemm, 3))
        except Exception as e:
            pass
        del q, k, v
        torch.cuda.empty_cache()

# decode: B sequences of one query token against ctx cached keys; calls replayed from a CUDA graph
# over K/V copies of >= 256 MiB in all (each call reads another copy), as attention-bench does.
def graph_us(make_call, n, calls):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for i in range(n): make_call(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for i in range(calls): make_call(i % n)
    g.replay(); torch.cuda.synchronize()
    ts = []
    for _ in range(3):
        t0 = torch.cuda.Event(enable_timing=True); t1 = torch.cuda.Event(enable_timing=True)
        t0.record(); g.replay(); t1.record(); torch.cuda.synchronize(); ts.append(t0.elapsed_time(t1) * 1e3 / calls)
    ts.sort(); return ts[1]

for D in (64, 128):
    for ctx in ((8192,) if quick else (8192, 16384, 32768)):
        for B in (1, 4, 16, 64):
            kv_bytes = 2.0 * B * Hkv * ctx * D * 2
            n = int(min(32, max(1, math.ceil((256 << 20) / kv_bytes))))
            if kv_bytes * n > 40e9: continue
            qs = [torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device=dev) for _ in range(n)]
            ks = [torch.randn(B, Hkv, ctx, D, dtype=torch.bfloat16, device=dev) for _ in range(n)]
            vs = [torch.randn(B, Hkv, ctx, D, dtype=torch.bfloat16, device=dev) for _ in range(n)]
            calls = max(16, n)
            for be in backends:
                try:
                    with sdpa_kernel(backends[be]):
                        F.scaled_dot_product_attention(qs[0], ks[0], vs[0], enable_gqa=True)
                        us = graph_us(lambda i: F.scaled_dot_product_attention(qs[i], ks[i], vs[i], enable_gqa=True), n, calls)
                    gbs = kv_bytes / us / 1e3
                    out(kind="decode", backend=be, D=D, batch=B, context=ctx, us=round(us, 1), GBs=round(gbs, 1), of_copy=round(gbs / copy_gbs, 3))
                except Exception as e:
                    out(kind="decode", backend=be, D=D, batch=B, context=ctx, error=str(e).splitlines()[0][:200])
            try:
                from flash_attn import flash_attn_with_kvcache
                qt = [t.transpose(1, 2).contiguous() for t in qs]; kt = [t.transpose(1, 2).contiguous() for t in ks]
                vt = [t.transpose(1, 2).contiguous() for t in vs]
                us = graph_us(lambda i: flash_attn_with_kvcache(qt[i], kt[i], vt[i]), n, calls)
                gbs = kv_bytes / us / 1e3
                out(kind="decode", backend="flash_attn_pkg_kvcache", D=D, batch=B, context=ctx, us=round(us, 1), GBs=round(gbs, 1), of_copy=round(gbs / copy_gbs, 3))
                del qt, kt, vt
            except ImportError:
                pass
            except Exception as e:
                out(kind="decode", backend="flash_attn_pkg_kvcache", D=D, batch=B, context=ctx, error=str(e).splitlines()[0][:200])
            del qs, ks, vs
            torch.cuda.empty_cache()
