#!/usr/bin/env python3
"""Derive the planner's eager-PyTorch constants (crates/gpuwise-plan/src/eager.rs) from the
kernel profiles `bench/gpu/encoder-anatomy.py` measured, and print them.

    python3 bench/gpu/eager-fit.py [bench/gpu/encoder-anatomy-h200.jsonl]

Per precision (fp32; 16-bit under autocast), from BERT-large (8 x 512) and BERT-base (32 x 128):

- matmul efficiency: the step's training FLOPs (6 x the multiplied parameters, less the
  embedding a classification head never projects onto, plus 12 L h s of attention) over the
  matrix-multiply kernels' time, as a share of the card's dense peak; the mean of the two models;
- bytes per token and layer of the other kernels (elementwise, normalisation, softmax, dropout,
  reductions, copies), at the card's peak bandwidth (their efficiency folded in), as
  beta_h * hidden + beta_s * heads * seq: two models, two unknowns, solved exactly;
- the optimizer's bytes per parameter (its multi-tensor kernels; the profiler's
  `Optimizer.step#` range, which spans those kernels, is not counted twice);
- kernels per layer and per step beyond the layers, from the two models' kernel counts;
- the host's time per kernel, from the steps whose wall time exceeds their kernel time by a
  fifth or more (the GPU waits on Python there).
"""

import json
import sys

# Shapes from ../shared/data/model-architectures.csv (parameters as computed from config.json).
MODELS = {
    "bert-large": dict(params=335141888, layers=24, hidden=1024, heads=16, vocab=30522),
    "bert-base": dict(params=108310272, layers=12, hidden=768, heads=12, vocab=28996),
}
# The profiled runs built BERT-base with BERT's own 30,522-token vocabulary (bench script's
# VOCAB); the embedding is a lookup and a classification head never multiplies by it, so only
# the parameter count differs: recount it for that vocabulary.
MODELS["bert-base"]["params"] += (30522 - 28996) * 768
MODELS["bert-base"]["vocab"] = 30522
PEAK = {"fp32": 67e12, "amp_bf16": 989.4e12}  # H200 dense peaks (catalog)
BANDWIDTH = 4.8e12  # H200 bytes/s (catalog)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "bench/gpu/encoder-anatomy-h200.jsonl"
    runs = [json.loads(l) for l in open(path)]
    steps = [r for r in runs if r.get("part") == "time"]
    out = {}
    for precision in ("fp32", "amp_bf16"):
        rows = []
        for r in (x for x in steps if x["precision"] == precision):
            m = MODELS[r["case"].split()[0]]
            tokens = r["batch"] * r["seq"]
            n = m["params"] - m["vocab"] * m["hidden"]
            flops = tokens * (6 * n + 12 * m["layers"] * m["hidden"] * r["seq"])
            kinds = r["kernel_ms_by_kind"]
            annotation = sum(k["ms"] for k in r["top_kernels"] if k["name"].startswith("Optimizer.step#"))
            matmul_s = kinds["matmul"] / 1e3
            optimizer_s = (kinds["optimizer"] - annotation) / 1e3
            other_s = sum(v for k, v in kinds.items() if k not in ("matmul", "optimizer")) / 1e3
            rows.append(
                dict(
                    case=r["case"],
                    efficiency=flops / matmul_s / PEAK[precision],
                    bytes_per_token_layer=other_s * BANDWIDTH / (tokens * m["layers"]),
                    h=m["hidden"],
                    s_term=m["heads"] * r["seq"],
                    opt_bytes_per_param=optimizer_s * BANDWIDTH / m["params"],
                    kernels=r["kernels_per_step"],
                    layers=m["layers"],
                    wall_s=r["step_wall_ms"] / 1e3,
                    kernel_s=(r["kernel_ms"] - annotation) / 1e3,
                )
            )
        (a, b) = rows
        # beta_h * h + beta_s * s_term = bytes, for both models.
        det = a["h"] * b["s_term"] - b["h"] * a["s_term"]
        beta_h = (a["bytes_per_token_layer"] * b["s_term"] - b["bytes_per_token_layer"] * a["s_term"]) / det
        beta_s = (a["h"] * b["bytes_per_token_layer"] - b["h"] * a["bytes_per_token_layer"]) / det
        per_layer = (a["kernels"] - b["kernels"]) / (a["layers"] - b["layers"])
        fixed = a["kernels"] - per_layer * a["layers"]
        host = [r["wall_s"] / r["kernels"] for r in rows if r["wall_s"] > 1.2 * r["kernel_s"]]
        out[precision] = dict(
            matmul_efficiency=round(sum(r["efficiency"] for r in rows) / 2, 3),
            efficiency_each={r["case"]: round(r["efficiency"], 3) for r in rows},
            beta_hidden_bytes=round(beta_h, 1),
            beta_scores_bytes=round(beta_s, 1),
            optimizer_bytes_per_param={r["case"]: round(r["opt_bytes_per_param"], 1) for r in rows},
            kernels_per_layer=round(per_layer, 1),
            kernels_fixed=round(fixed, 1),
            host_s_per_kernel_when_bound={r["case"]: round(r["wall_s"] / r["kernels"] * 1e6, 1) for r in rows if r["wall_s"] > 1.2 * r["kernel_s"]},
        )
        if host:
            out[precision]["host_us_per_kernel"] = round(sum(host) / len(host) * 1e6, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
