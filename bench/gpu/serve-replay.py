#!/usr/bin/env python3
"""Serve request traces on a real GPU: a minimal continuous-batching engine running a
Llama-2-7B-shaped model (random bf16 weights, 32 layers), so that `gpuwise simulate serve`
can be compared with a measured timeline rather than with another simulator.

The engine is the simulator's default scheduler: first come, first served; each iteration
admits waiting requests while the batch has room (at most 128), prefills whole prompts up to
8,192 tokens and decodes one token of every running sequence; the iteration that ends a
prompt gives its first token. Iterations run their kernels as an engine does: decode-only
iterations replay CUDA graphs captured per batch size (vLLM captures its decode steps too),
iterations with a prompt run eagerly; every iteration ends with a synchronize, as an engine
that reads its sampled tokens does. Decode attention reads, per sequence, the batch's mean
context rounded up to 32 tokens (the same bytes as per-sequence lengths within 32 tokens:
PyTorch's flash kernel takes one length per batch); prompt attention is one flash kernel per
prompt. Not modelled: sampling, detokenization, an HTTP front end.

    python3 bench/gpu/serve-replay.py OUT_DIR TRACE.csv [TRACE.csv ...]

Each trace is `arrival_s,input_tokens,output_tokens`. Writes OUT_DIR/NAME.requests.csv
(`arrival_s,input_tokens,output_tokens,first_token_s,done_s`, seconds from the replay's start)
and OUT_DIR/NAME.steps.csv (`prefill_tokens,prompts,decode_seqs,decode_context,ms`).
"""
import contextlib
import csv
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DEV, DT = "cuda", torch.bfloat16
H, KV, HD, HID, FFN, LAYERS, VOCAB = 32, 32, 128, 4096, 11008, 32, 32000
MAX_BATCH, BUDGET, CTX_STEP = 128, 8192, 32
# SERVE_REPLAY_DRY=1: a tiny model on the CPU, eager only, to check the engine's logic.
DRY = os.environ.get("SERVE_REPLAY_DRY") == "1"
if DRY:
    DEV, DT = "cpu", torch.float32
    H, KV, HD, HID, FFN, LAYERS, VOCAB = 4, 4, 16, 64, 128, 2, 100


def flash():
    return contextlib.nullcontext() if DRY else sdpa_kernel([SDPBackend.FLASH_ATTENTION])


def sync():
    if not DRY:
        torch.cuda.synchronize()


class Engine:
    def __init__(self, max_len):
        torch.manual_seed(0)
        g = lambda *s: torch.randn(*s, device=DEV, dtype=DT) * 0.02  # noqa: E731
        self.layers = [(g(HID, (H + 2 * KV) * HD), g(H * HD, HID), g(HID, 2 * FFN), g(FFN, HID)) for _ in range(LAYERS)]
        self.lm_head = g(HID, VOCAB)
        self.norm = torch.ones(HID, device=DEV, dtype=DT)
        self.max_len = max_len
        # Per layer: K and V for MAX_BATCH sequences of max_len tokens.
        self.cache = [torch.zeros(2, MAX_BATCH, KV, max_len, HD, device=DEV, dtype=DT) for _ in range(LAYERS)]
        self.x = torch.randn(BUDGET + MAX_BATCH, HID, device=DEV, dtype=DT)
        self.graphs = {}
        self.pool = None if DRY else torch.cuda.graph_pool_handle()

    def layer_tail(self, h, o, wo, wup, wdown):
        h = h + o @ wo
        a = F.rms_norm(h, (HID,), self.norm)
        u = a @ wup
        return h + (F.silu(u[:, :FFN]) * u[:, FFN:]) @ wdown

    def decode_attention(self, qkv, c, d, ctx):
        q = qkv[:, : H * HD].view(d, H, 1, HD)
        k_new = qkv[:, H * HD : (H + KV) * HD].view(d, KV, 1, HD)
        v_new = qkv[:, (H + KV) * HD :].view(d, KV, 1, HD)
        c[0, :d, :, ctx - 1 : ctx].copy_(k_new)
        c[1, :d, :, ctx - 1 : ctx].copy_(v_new)
        with flash():
            o = F.scaled_dot_product_attention(q, c[0, :d, :, :ctx], c[1, :d, :, :ctx])
        return o.reshape(d, H * HD)

    def step(self, prompts, d, ctx):
        """One iteration: whole prompts of the given lengths, then `d` decodes at `ctx`."""
        t = sum(prompts) + d
        h = self.x[:t]
        for (wqkv, wo, wup, wdown), c in zip(self.layers, self.cache):
            a = F.rms_norm(h, (HID,), self.norm)
            qkv = a @ wqkv
            qkv[:, : (H + KV) * HD].mul_(1.0001)  # stands in for rotary embedding
            outs, off = [], 0
            for slot, n in enumerate(prompts):
                p = qkv[off : off + n].view(n, H + 2 * KV, HD).transpose(0, 1)
                c[0, MAX_BATCH - 1 - slot % MAX_BATCH, :, :n].copy_(p[H : H + KV])
                c[1, MAX_BATCH - 1 - slot % MAX_BATCH, :, :n].copy_(p[H + KV :])
                with flash():
                    o = F.scaled_dot_product_attention(p[:H][None], p[H : H + KV][None], p[H + KV :][None], is_causal=True)
                outs.append(o[0].transpose(0, 1).reshape(n, H * HD))
                off += n
            if d:
                outs.append(self.decode_attention(qkv[off:], c, d, ctx))
            o = outs[0] if len(outs) == 1 else torch.cat(outs)
            h = self.layer_tail(h, o, wo, wup, wdown)
        sampled = len(prompts) + d
        return F.rms_norm(h[t - sampled :], (HID,), self.norm) @ self.lm_head

    def capture(self, d, ctx):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.step([], d, ctx)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            self.step([], d, ctx)
        self.graphs[(d, ctx)] = g

    def run(self, prompts, d, ctx):
        if not prompts and not DRY:
            g = self.graphs.get((d, ctx))
            if g is None:
                self.capture(d, ctx)
                g = self.graphs[(d, ctx)]
            g.replay()
        else:
            self.step(prompts, d, ctx)
        sync()


def ctx_bucket(mean):
    return int(-(-mean // CTX_STEP) * CTX_STEP)


def replay(engine, reqs):
    """reqs: [(arrival, input, output)] sorted. Returns per-request times and per-step logs."""
    first = [None] * len(reqs)
    done = [None] * len(reqs)
    steps = []
    waiting, running = 0, []  # running: [req, generated]
    t0 = time.perf_counter()
    now = lambda: time.perf_counter() - t0  # noqa: E731
    while waiting < len(reqs) or running:
        if not running and waiting < len(reqs) and reqs[waiting][0] > now():
            while reqs[waiting][0] > now():
                left = reqs[waiting][0] - now()
                if left > 0.002:
                    time.sleep(left - 0.001)
        prompts, budget = [], BUDGET
        while waiting < len(reqs) and reqs[waiting][0] <= now() and len(running) < MAX_BATCH:
            n = reqs[waiting][1]
            if prompts and n > budget:
                break
            prompts.append(waiting)
            budget -= n
            running.append([waiting, 0])
            waiting += 1
        decoders = [s for s in running if s[1] > 0]
        d = len(decoders)
        ctx_sum = sum(reqs[s[0]][1] + s[1] for s in decoders)
        ctx = ctx_bucket(ctx_sum / d) if d else 0
        start = time.perf_counter()
        engine.run([reqs[i][1] for i in prompts], d, ctx)
        t = now()
        steps.append((sum(reqs[i][1] for i in prompts), len(prompts), d, ctx_sum, (time.perf_counter() - start) * 1e3))
        for s in running:
            s[1] += 1
            if s[1] == 1:
                first[s[0]] = t
            if s[1] >= reqs[s[0]][2]:
                done[s[0]] = t
        running = [s for s in running if done[s[0]] is None]
    return first, done, steps


def main():
    out = sys.argv[1]
    traces = []
    for path in sys.argv[2:]:
        with open(path) as f:
            rows = [(float(r["arrival_s"]), int(r["input_tokens"]), int(r["output_tokens"])) for r in csv.DictReader(f)]
        traces.append((os.path.basename(path).rsplit(".", 1)[0], sorted(rows)))
    max_len = max(i + o for _, rows in traces for _, i, o in rows)
    max_len = ctx_bucket(max_len + CTX_STEP)
    print("cpu (dry run)" if DRY else torch.cuda.get_device_name(0), "max_len", max_len, flush=True)
    engine = Engine(max_len)
    t = time.perf_counter()
    # Graphs for every batch size at every context bucket the traces can reach, before any
    # replay (a capture in the middle of one would stall it).
    lo = ctx_bucket(min(i for _, rows in traces for _, i, _ in rows) + 1)
    for ctx in range(lo, max_len + 1, CTX_STEP):
        for d in range(1, MAX_BATCH + 1):
            if not DRY:
                engine.capture(d, ctx)
    print(f"captured {len(engine.graphs)} graphs in {time.perf_counter() - t:.1f} s", flush=True)
    engine.run([512], 0, 0)  # warm the eager path
    for name, rows in traces:
        t = time.perf_counter()
        first, done, steps = replay(engine, rows)
        print(f"{name}: {len(rows)} requests, {len(steps)} iterations in {time.perf_counter() - t:.1f} s", flush=True)
        with open(os.path.join(out, f"{name}.requests.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["arrival_s", "input_tokens", "output_tokens", "first_token_s", "done_s"])
            for (a, i, o), ft, dn in zip(rows, first, done):
                w.writerow([f"{a:.6f}", i, o, f"{ft:.6f}", f"{dn:.6f}"])
        with open(os.path.join(out, f"{name}.steps.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["prefill_tokens", "prompts", "decode_seqs", "decode_context", "ms"])
            w.writerows([(p, n, d, c, f"{ms:.4f}") for p, n, d, c, ms in steps])


if __name__ == "__main__":
    main()
