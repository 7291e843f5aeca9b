#!/usr/bin/env python3
"""Fit the serving step model's kernel constants (crates/gpuwise-plan/src/kernels.rs).

- Matrix multiplies and the small per-layer kernels: on Vidur's measured operator times
  (../shared/data/inference/vidur-operator-profiles), the *shaping set* only: Llama-2-7B and
  Qwen-72B on each GPU (the split in docs/accuracy.md, fixed before fitting). H100 gives the
  constants for Hopper and Blackwell, A40 for every other GPU.
- Attention: on our own H200 measurements (tests/data/serve/h200-2026-11-27/attention.csv,
  bench/gpu/step-times.py), which Vidur's public data lacks.

Prints the constants as Rust. Needs numpy and scipy.

    python3 bench/step-model-fit.py [SHARED_DATA_DIR]
"""
import csv
import math
import os
import sys

import numpy as np
from scipy.optimize import minimize

SHARED = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GPUWISE_SHARED_DATA", "../shared/data")
PROFILES = os.path.join(SHARED, "inference", "vidur-operator-profiles")
HERE = os.path.dirname(os.path.abspath(__file__))
ATTENTION = os.path.join(HERE, "..", "tests", "data", "serve", "h200-2026-11-27", "attention.csv")
# Datasheet dense 16-bit tensor peak and memory bandwidth (the catalog's figures).
SPEC = {"h100": (989.4e12, 3350e9), "a40": (149.7e12, 696e9), "h200": (989.4e12, 4800e9)}
SHAPING = ["meta-llama__Llama-2-7b-hf", "Qwen__Qwen-72B"]
GEMMS = ["attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"]
SMALL = {"input_layernorm": "norm", "post_attention_layernorm": "norm", "add": "add", "mlp_act": "act", "attn_rope": "rope"}
KINDS = ["norm", "add", "act", "rope"]


def shapes(x):
    """Each operator's shape on one GPU: ('gemm', m, k, n) or ('elem', bytes moved)."""
    heads, kv, h = int(x["n_head"]), int(x["n_kv_head"]), int(x["n_embd"])
    f, gated = int(x["n_expanded_embd"]), x["use_gated_mlp"] == "True"
    t, m = int(x["num_tensor_parallel_workers"]), int(x["num_tokens"])
    hd = h // heads
    return {
        "attn_pre_proj": ("gemm", m, h, (heads + 2 * kv) * hd // t),
        "attn_post_proj": ("gemm", m, heads * hd // t, h),
        "mlp_up_proj": ("gemm", m, h, (2 if gated else 1) * f // t),
        "mlp_down_proj": ("gemm", m, f // t, h),
        "input_layernorm": ("elem", 4 * m * h),
        "post_attention_layernorm": ("elem", 4 * m * h),
        "add": ("elem", 6 * m * h),
        "mlp_act": ("elem", 2 * m * (3 if gated else 2) * f // t),
        "attn_rope": ("elem", 4 * m * (heads + kv) * hd // t),
    }


def op_time(p, spec, shape, op):
    peak, bw = spec
    if shape[0] == "gemm":
        _, m, k, n = shape
        tc = 2 * m * k * n / (p["gemm_compute"] * peak)
        tm = 2 * (k * n + m * k + m * n) / (p["gemm_memory"] * bw)
        q = p["gemm_blend"]
        return p["gemm_fixed"] + (tc**q + tm**q) ** (1 / q)
    kind = SMALL[op]
    return p[kind + "_fixed"] + shape[1] / (p[kind + "_bandwidth"] * bw)


def rows(gpu, model):
    with open(os.path.join(PROFILES, gpu, model + ".mlp.csv")) as f:
        for x in csv.DictReader(f):
            sh = shapes(x)
            meas = {o: float(x[f"time_stats.{o}.median"]) * 1e-3 for o in sh if f"time_stats.{o}.median" in x}
            yield sh, meas


def sig(v):
    return 1 / (1 + math.exp(-v))


def unpack(v):
    p = {"gemm_compute": sig(v[0]), "gemm_memory": sig(v[1]), "gemm_fixed": math.exp(v[2]), "gemm_blend": 1 + math.exp(v[3])}
    for i, kind in enumerate(KINDS):
        p[kind + "_bandwidth"] = sig(v[4 + 2 * i])
        p[kind + "_fixed"] = math.exp(v[5 + 2 * i])
    return p


def fit_operators(gpu):
    data = [r for m in SHAPING for r in rows(gpu, m)]

    def loss(v):
        p, err, n = unpack(v), 0.0, 0
        for sh, meas in data:
            for op, t in meas.items():
                if t > 0:
                    err += math.log(op_time(p, SPEC[gpu], sh[op], op) / t) ** 2
                    n += 1
        return err / n

    v0 = [1.0, 1.5, math.log(5e-6), 0.0] + [0.0, math.log(3e-6)] * 4
    res = minimize(loss, v0, method="Nelder-Mead", options={"maxiter": 20000, "maxfev": 20000, "xatol": 1e-5, "fatol": 1e-9})
    return unpack(res.x)


def fit_line(xs, ys):
    """t = fixed + x / rate, least squares on time relative to the square root of the time (long
    kernels weigh more than launch-bound ones, without the longest deciding alone)."""
    best = None
    for fixed in np.linspace(0, 30e-6, 601):
        w = [1 / math.sqrt(y) for y in ys]
        # For a given fixed time, the best 1/rate is a weighted least-squares slope through it.
        num = sum(wi * x * (y - fixed) for wi, x, y in zip(w, xs, ys))
        den = sum(wi * x * x for wi, x in zip(w, xs))
        slope = num / den
        err = sum(wi * (fixed + slope * x - y) ** 2 for wi, x, y in zip(w, xs, ys))
        if slope > 0 and (best is None or err < best[0]):
            best = (err, fixed, slope)
    return best[1], best[2]


def fit_attention():
    with open(ATTENTION) as f:
        a = [x for x in csv.DictReader(f) if x["ms"]]
    peak, bw = SPEC["h200"]
    pre = [x for x in a if x["kind"] == "prefill"]
    xs = [2 * int(x["q_len"]) ** 2 * int(x["heads"]) * int(x["head_dim"]) for x in pre]
    fixed_p, slope_p = fit_line(xs, [float(x["ms"]) * 1e-3 for x in pre])
    dec = [x for x in a if x["kind"] == "decode"]
    xs = [int(x["batch"]) * int(x["kv_len"]) * 2 * int(x["kv_heads"]) * int(x["head_dim"]) * 2 for x in dec]
    fixed_d, slope_d = fit_line(xs, [float(x["ms"]) * 1e-3 for x in dec])
    return {
        "prefill_attention_compute": 1 / (slope_p * peak),
        "prefill_attention_fixed": fixed_p,
        "decode_attention_bandwidth": 1 / (slope_d * bw),
        "decode_attention_fixed": fixed_d,
    }


def main():
    attention = fit_attention()
    for gpu, name in (("h100", "HOPPER"), ("a40", "AMPERE")):
        p = fit_operators(gpu)
        p.update(attention)
        print(f"// {name}: fitted on {gpu} ({', '.join(SHAPING)}); attention on the H200 measurements")
        for k, v in p.items():
            print(f"    {k}: {v:.6g},")


if __name__ == "__main__":
    main()
