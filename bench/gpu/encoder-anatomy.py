#!/usr/bin/env python3
"""Where an eager encoder fine-tune's memory and time go, measured on a real GPU (issue 41).

    python3 bench/gpu/encoder-anatomy.py --out encoder-anatomy.jsonl   # about 5 minutes on an H200

Two questions the public numbers leave open, each answered by one part:

1. **Memory, as each reading sees it.** Hugging Face's Trainer fine-tunes BERT-large with a
   sequence-classification head on fixed 512-token rows (the "model training anatomy" recipe:
   batch 4; batch 1 with 4 accumulation steps; fp16 mixed precision; gradient checkpointing;
   Adafactor), each in a fresh process, reading after training: PyTorch's allocated peak
   (`max_memory_allocated`), its reserved peak (`max_memory_reserved`) and NVML's "used" for the
   process's GPU (what `nvidia-smi` and the recipe print). The gap between allocated and reserved
   is the allocator's cache; the gap between reserved and used, the CUDA context. The same is run
   with PyTorch 1.x's `zero_grad` (gradients zeroed in place, kept between steps) and with SDPA
   attention, to show what those two choices are worth.
2. **Time, by kernel.** One training step of BERT-large (batch 8 × 512, eager attention) in fp32
   and under bf16 autocast, and of BERT-base (32 × 128) in fp32, under `torch.profiler`: the
   GPU's kernel time split into matrix multiplies, elementwise and normalisation kernels,
   softmax and dropout, and the optimizer, the number of kernels a step launches, and the
   step's wall time, so that "the GPU is busy but memory-bound" and "the GPU waits on Python"
   can be told apart. A microbenchmark gives the host's cost of one eager launch.

Needs PyTorch, transformers and nvidia-ml-py; no download (random weights in the published
shapes change no memory figure and no speed). Each case appends one JSON line to --out.
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import time

BERT_LARGE = dict(layers=24, hidden=1024, heads=16, ffn=4096)
BERT_BASE = dict(layers=12, hidden=768, heads=12, ffn=3072)
VOCAB = 30522


def bert(shape, attn):
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(
        vocab_size=VOCAB,
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        intermediate_size=shape["ffn"],
        max_position_embeddings=512,
        num_labels=2,
    )
    cfg._attn_implementation = attn
    return BertForSequenceClassification(cfg)


def nvml_used_mib():
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    used = pynvml.nvmlDeviceGetMemoryInfo(handle).used
    pynvml.nvmlShutdown()
    return used / 2**20


def trainer_case(args):
    """One Trainer run in this process (called through a fresh interpreter per case)."""
    import torch
    from transformers import Trainer, TrainingArguments

    if args.keep_grads:
        # PyTorch before 2.0: zero_grad() zeroed gradients in place and kept them.
        torch.nn.Module.zero_grad = functools.partialmethod(
            torch.nn.Module.zero_grad, set_to_none=False
        )
        torch.optim.Optimizer.zero_grad = functools.partialmethod(
            torch.optim.Optimizer.zero_grad, set_to_none=False
        )

    class Rows(torch.utils.data.Dataset):
        def __init__(self, n, seq):
            g = torch.Generator().manual_seed(0)
            self.ids = torch.randint(100, VOCAB, (n, seq), generator=g)
            self.labels = torch.randint(0, 2, (n,), generator=g)

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "labels": self.labels[i]}

    model = bert(BERT_LARGE, args.attn)
    targs = TrainingArguments(
        output_dir="/tmp/anatomy-out",
        per_device_train_batch_size=args.batch,
        gradient_accumulation_steps=args.ga,
        gradient_checkpointing=args.ckpt,
        fp16=args.fp16,
        optim=args.optim,
        max_steps=args.steps,
        logging_strategy="no",
        save_strategy="no",
        report_to="none",
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=targs, train_dataset=Rows(args.batch * args.ga * args.steps, 512))
    result = trainer.train()
    torch.cuda.synchronize()
    out = {
        "part": "memory",
        "case": args.case,
        "batch": args.batch,
        "ga": args.ga,
        "checkpointing": args.ckpt,
        "fp16": args.fp16,
        "optim": args.optim,
        "attn": args.attn,
        "keep_grads": args.keep_grads,
        "allocated_peak_mib": torch.cuda.max_memory_allocated() / 2**20,
        "reserved_peak_mib": torch.cuda.max_memory_reserved() / 2**20,
        "reserved_now_mib": torch.cuda.memory_reserved() / 2**20,
        "nvml_used_mib": nvml_used_mib(),
        "samples_per_s": result.metrics.get("train_samples_per_second"),
        "steps": args.steps,
    }
    print(json.dumps(out), flush=True)


def context_case(_args):
    """NVML's used memory with nothing but a 1×1 tensor (the CUDA context and kernels)."""
    import torch

    torch.ones((1, 1), device="cuda")
    torch.cuda.synchronize()
    print(json.dumps({"part": "memory", "case": "context-only", "nvml_used_mib": nvml_used_mib()}), flush=True)


def classify(name):
    n = name.lower()
    if any(k in n for k in ("gemm", "xmma", "nvjet", "cutlass", "cublas", "sm90_", "sm80_", "wgmma")):
        return "matmul"
    if "multi_tensor" in n or "foreach" in n or "adam" in n:
        return "optimizer"
    if "softmax" in n:
        return "softmax"
    if "dropout" in n or "fused_dropout" in n or "bernoulli" in n:
        return "dropout"
    if "norm" in n:
        return "norm"
    if "reduce" in n or "sum" in n:
        return "reduce"
    if "copy" in n or "cast" in n or "to_copy" in n:
        return "copy"
    return "elementwise"


def step_case(name, shape, batch, seq, autocast):
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = bert(shape, "eager").cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(100, VOCAB, (batch, seq), device="cuda")
    labels = torch.randint(0, 2, (batch,), device="cuda")

    def step():
        ctx = torch.autocast("cuda", dtype=torch.bfloat16) if autocast else torch.autocast("cuda", enabled=False)
        with ctx:
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / 5

    steps = 3
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    by_kind, kernels = {}, 0
    top = []
    for e in prof.key_averages():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            us = getattr(e, "self_device_time_total", None)
            if us is None:
                us = getattr(e, "self_cuda_time_total", 0)
            kind = classify(e.key)
            by_kind[kind] = by_kind.get(kind, 0.0) + us / 1e3 / steps
            kernels += e.count
            top.append((us / 1e3 / steps, e.count // steps, e.key[:90]))
    top.sort(reverse=True)
    gpu_ms = sum(by_kind.values())
    out = {
        "part": "time",
        "case": name,
        "batch": batch,
        "seq": seq,
        "precision": "amp_bf16" if autocast else "fp32",
        "step_wall_ms": wall * 1e3,
        "kernel_ms": gpu_ms,
        "kernel_ms_by_kind": {k: round(v, 3) for k, v in sorted(by_kind.items())},
        "kernels_per_step": kernels / steps,
        "tokens_per_s": batch * seq / wall,
        "top_kernels": [{"ms": round(a, 3), "per_step": b, "name": c} for a, b, c in top[:25]],
    }
    del model, opt
    torch.cuda.empty_cache()
    return out


def launch_case():
    import torch

    out = {"part": "launch"}
    x = torch.zeros(1, device="cuda")
    for label, ctx in (("add_", None), ("add_ autocast", "bf16")):
        for _ in range(2000):
            x.add_(1)
        torch.cuda.synchronize()
        n = 20000
        t0 = time.perf_counter()
        if ctx:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                for _ in range(n):
                    x.add_(1)
        else:
            for _ in range(n):
                x.add_(1)
        torch.cuda.synchronize()
        out[label + " us"] = (time.perf_counter() - t0) / n * 1e6
    lin = torch.nn.Linear(64, 64).cuda()
    y = torch.zeros(8, 64, device="cuda")
    for label, ctx in (("Linear fwd", False), ("Linear fwd autocast", True)):
        n = 5000
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=ctx):
            for _ in range(n):
                lin(y)
        torch.cuda.synchronize()
        out[label + " us"] = (time.perf_counter() - t0) / n * 1e6
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="encoder-anatomy.jsonl")
    ap.add_argument("--one", choices=["trainer", "context"], help=argparse.SUPPRESS)
    ap.add_argument("--case", default="")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--ga", type=int, default=1)
    ap.add_argument("--ckpt", action="store_true")
    ap.add_argument("--fp16", action="store_true")
    ap.add_argument("--optim", default="adamw_torch")
    ap.add_argument("--attn", default="eager")
    ap.add_argument("--keep-grads", action="store_true")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: memory,time,launch")
    args = ap.parse_args()
    if args.one == "trainer":
        return trainer_case(args)
    if args.one == "context":
        return context_case(args)

    import torch
    import transformers

    skip = set(filter(None, args.skip.split(",")))
    env = {
        "part": "env",
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    with open(args.out, "a") as f:
        f.write(json.dumps(env) + "\n")

    def emit(rec):
        line = json.dumps(rec)
        print(line, flush=True)
        with open(args.out, "a") as f:
            f.write(line + "\n")

    def attempt(name, f, *a):
        try:
            emit(f(*a))
        except Exception as e:  # one failed part must not lose the others' figures
            emit({"part": "error", "case": name, "error": repr(e)[-1500:]})

    if "launch" not in skip:
        attempt("launch", launch_case)
    if "time" not in skip:
        attempt("t1", step_case, "bert-large fp32 8x512", BERT_LARGE, 8, 512, False)
        attempt("t2", step_case, "bert-large amp_bf16 8x512", BERT_LARGE, 8, 512, True)
        attempt("t3", step_case, "bert-base fp32 32x128", BERT_BASE, 32, 128, False)
        attempt("t4", step_case, "bert-base amp_bf16 32x128", BERT_BASE, 32, 128, True)
    if "memory" not in skip:
        me = [sys.executable, os.path.abspath(__file__)]
        runs = [
            ["--one", "context"],
            ["--one", "trainer", "--case", "vanilla bs4"],
            ["--one", "trainer", "--case", "bs1 ga4", "--batch", "1", "--ga", "4"],
            ["--one", "trainer", "--case", "bs1 ga4 ckpt", "--batch", "1", "--ga", "4", "--ckpt"],
            ["--one", "trainer", "--case", "fp16 bs4", "--fp16"],
            ["--one", "trainer", "--case", "adafactor bs4", "--optim", "adafactor"],
            ["--one", "trainer", "--case", "vanilla bs4 keep grads", "--keep-grads"],
            ["--one", "trainer", "--case", "fp16 bs4 keep grads", "--fp16", "--keep-grads"],
            ["--one", "trainer", "--case", "vanilla bs4 sdpa", "--attn", "sdpa"],
        ]
        for extra in runs:
            p = subprocess.run(me + extra, capture_output=True, text=True, timeout=240)
            lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if p.returncode != 0 or not lines:
                emit({"part": "memory", "case": " ".join(extra), "error": p.stderr[-1500:]})
            else:
                emit(json.loads(lines[-1]))


if __name__ == "__main__":
    main()
