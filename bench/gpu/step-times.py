#!/usr/bin/env python3
"""Measure on a real GPU what the serving step model predicts: attention kernels (prefill and
decode), a decoder layer's other operators, and whole engine steps of a Llama-2-7B-shaped model
(random bf16 weights: the time of a kernel does not depend on the values it multiplies).

Every timing is a CUDA graph replayed back to back (no launch gaps, as an engine that captures
its decode steps runs them), timed with CUDA events, the median of five replays. Writes CSVs to
the directory given (default: .). Needs PyTorch with CUDA; runs in about two minutes on an H100.

    python3 bench/gpu/step-times.py OUT_DIR
"""
import csv
import os
import sys
import traceback

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
DEV, DT = "cuda", torch.bfloat16
torch.manual_seed(0)


def timed(fn, reps):
    """Milliseconds of one call of `fn`, from a graph holding `reps` calls."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    del g
    return sorted(times)[2]


def section(name, fn):
    print(f"== {name}", flush=True)
    try:
        fn()
    except Exception:  # one failed section must not lose the others
        traceback.print_exc()
        sys.stdout.flush()


def write(name, header, rows):
    with open(os.path.join(OUT, name), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    print(f"   {len(rows)} rows -> {name}", flush=True)


def attempt(fn, reps):
    try:
        return round(timed(fn, reps), 5)
    except Exception as e:  # a kernel this GPU or build lacks: recorded as missing
        print(f"   failed: {e}", flush=True)
        return ""


def attention():
    rows = []
    for heads, kv_heads in ((32, 32), (64, 8)):
        for s in (128, 256, 512, 1024, 2048, 4096, 8192, 16384):
            q = torch.randn(1, heads, s, 128, device=DEV, dtype=DT)
            k = torch.randn(1, kv_heads, s, 128, device=DEV, dtype=DT)
            v = torch.randn_like(k)

            def run():
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv_heads != heads)

            rows.append(("prefill", heads, kv_heads, 128, 1, s, s, attempt(run, 10)))
        for b in (1, 8, 32, 128):
            for ctx in (256, 1024, 4096):
                if b * ctx > 1 << 19:
                    continue
                q = torch.randn(b, heads, 1, 128, device=DEV, dtype=DT)
                k = torch.randn(b, kv_heads, ctx, 128, device=DEV, dtype=DT)
                v = torch.randn_like(k)

                def run():
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        F.scaled_dot_product_attention(q, k, v, enable_gqa=kv_heads != heads)

                rows.append(("decode", heads, kv_heads, 128, b, 1, ctx, attempt(run, 20)))
        torch.cuda.empty_cache()
    write("attention.csv", ["kind", "heads", "kv_heads", "head_dim", "batch", "q_len", "kv_len", "ms"], rows)


H, KV, HD, HID, FFN, LAYERS, VOCAB = 32, 32, 128, 4096, 11008, 32, 32000


def operators():
    """The per-layer operators Vidur profiles, at the same token counts, on this GPU."""
    wqkv = torch.randn(HID, (H + 2 * KV) * HD, device=DEV, dtype=DT) * 0.02
    wo = torch.randn(H * HD, HID, device=DEV, dtype=DT) * 0.02
    wup = torch.randn(HID, 2 * FFN, device=DEV, dtype=DT) * 0.02
    wdown = torch.randn(FFN, HID, device=DEV, dtype=DT) * 0.02
    norm_w = torch.ones(HID, device=DEV, dtype=DT)
    rows = []
    for m in (1, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024, 2048, 4096):
        x = torch.randn(m, HID, device=DEV, dtype=DT)
        y = torch.randn(m, HID, device=DEV, dtype=DT)
        up = torch.randn(m, 2 * FFN, device=DEV, dtype=DT)
        act = torch.randn(m, FFN, device=DEV, dtype=DT)
        ops = {
            "input_layernorm": lambda: F.rms_norm(x, (HID,), norm_w),
            "attn_pre_proj": lambda: x @ wqkv,
            "attn_post_proj": lambda: x @ wo,
            "mlp_up_proj": lambda: x @ wup,
            "mlp_act": lambda: F.silu(up[:, :FFN]) * up[:, FFN:],
            "mlp_down_proj": lambda: act @ wdown,
            "add": lambda: x + y,
        }
        for name, fn in ops.items():
            rows.append((name, m, round(timed(fn, 20), 5)))
    write("operators.csv", ["op", "tokens", "ms"], rows)


def steps():
    """Whole engine steps: `prefill` prompt tokens of one sequence plus `decodes` sequences at
    `context` tokens each, through 32 layers and the output projection of every sequence."""
    layers = []
    for _ in range(LAYERS):
        layers.append(
            (
                torch.randn(HID, (H + 2 * KV) * HD, device=DEV, dtype=DT) * 0.02,
                torch.randn(H * HD, HID, device=DEV, dtype=DT) * 0.02,
                torch.randn(HID, 2 * FFN, device=DEV, dtype=DT) * 0.02,
                torch.randn(FFN, HID, device=DEV, dtype=DT) * 0.02,
            )
        )
    lm_head = torch.randn(HID, VOCAB, device=DEV, dtype=DT) * 0.02
    norm_w = torch.ones(HID, device=DEV, dtype=DT)
    cache_tokens = 1 << 16
    caches = [torch.randn(2, cache_tokens * KV * HD, device=DEV, dtype=DT) for _ in range(LAYERS)]
    rows = []
    configs = [
        (128, 0, 0), (512, 0, 0), (2048, 0, 0), (4096, 0, 0),
        (0, 1, 512), (0, 1, 4096), (0, 8, 1024), (0, 32, 512), (0, 32, 2048),
        (0, 64, 1024), (0, 128, 512),
        (512, 31, 600), (256, 64, 1024), (2048, 16, 512), (128, 127, 512),
    ]
    for prefill, decodes, ctx in configs:
        tokens = prefill + decodes
        x = torch.randn(tokens, HID, device=DEV, dtype=DT)
        views = [c.view(2, -1)[:, : decodes * KV * ctx * HD].view(2, decodes, KV, ctx, HD) for c in caches]
        seqs = decodes + (1 if prefill else 0)

        def step():
            h = x
            for (wqkv, wo, wup, wdown), kvc in zip(layers, views):
                a = F.rms_norm(h, (HID,), norm_w)
                qkv = a @ wqkv
                qk = qkv[:, : (H + KV) * HD]
                qk.mul_(1.0001)  # stands in for rotary embedding: one pass over q and k
                outs = []
                if prefill:
                    p = qkv[:prefill].view(prefill, H + 2 * KV, HD).transpose(0, 1)
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        o = F.scaled_dot_product_attention(
                            p[:H].unsqueeze(0), p[H : H + KV].unsqueeze(0), p[H + KV :].unsqueeze(0), is_causal=True
                        )
                    outs.append(o[0].transpose(0, 1).reshape(prefill, H * HD))
                if decodes:
                    q = qkv[prefill:, : H * HD].view(decodes, H, 1, HD)
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        o = F.scaled_dot_product_attention(q, kvc[0], kvc[1])
                    outs.append(o.reshape(decodes, H * HD))
                o = outs[0] if len(outs) == 1 else torch.cat(outs)
                h = h + o @ wo
                a = F.rms_norm(h, (HID,), norm_w)
                u = a @ wup
                h = h + (F.silu(u[:, :FFN]) * u[:, FFN:]) @ wdown
            last = h[-seqs:]
            return F.rms_norm(last, (HID,), norm_w) @ lm_head

        ms = attempt(step, 1)
        rows.append((prefill, decodes, ctx, ms))
        print(f"   prefill {prefill} + {decodes} decodes at {ctx}: {ms} ms", flush=True)
    write("steps.csv", ["prefill_tokens", "decode_seqs", "decode_context", "ms"], rows)


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
    with open(os.path.join(OUT, "device.txt"), "w") as f:
        f.write(f"{torch.cuda.get_device_name(0)}\ntorch {torch.__version__}\n")
    section("attention", attention)
    torch.cuda.empty_cache()
    section("operators", operators)
    torch.cuda.empty_cache()
    section("steps", steps)
