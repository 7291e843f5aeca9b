#!/usr/bin/env python3
"""Measure, on a real GPU, workloads whose classes the planner was missing, so that
`gpuwise plan validate` can be checked against them (tests/data/plan/measured-h100.csv).

    python3 bench/planner-gpu.py --out results.json     # about 3 minutes on an H100

Needs PyTorch, transformers and peft (no download: every model is built from its published
shape with random weights, which changes no memory figure and no speed). Each case prints one
JSON line: peak memory as PyTorch's allocator reports it (`torch.cuda.max_memory_allocated`,
no CUDA context) and, for training, tokens per second over the timed steps after two warm-up
steps. The cases:

- BERT-large and BERT-base with a sequence-classification head, trained as Hugging Face's
  Trainer does by default (fp32, AdamW, eager attention, dropout on), and BERT-large under
  bf16 autocast;
- Llama-3.1-8B LoRA (rank 8 on every linear layer of the blocks, fp32 adapters on a bf16 base,
  AdamW, activation checkpointing, SDPA attention) at batch 2 × 2048 tokens;
- Llama-3.1-8B prefill of 65,536 and 131,072 tokens in chunks of 8,192 (as serving engines
  chunk it) into a bf16 KV cache, keeping only the last token's logits.
"""

import argparse
import gc
import json
import sys
import time

import torch


def peak_reset():
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def gib(b):
    return b / 2**30


def train_steps(model, batch, seq, vocab, steps, autocast_dtype=None, labels_kind="seq"):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    model.train()
    ids = torch.randint(0, vocab, (batch, seq), device="cuda")
    if labels_kind == "seq":
        labels = torch.randint(0, 2, (batch,), device="cuda")
    else:
        labels = ids
    times = []
    for step in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ctx = (
            torch.autocast("cuda", dtype=autocast_dtype)
            if autocast_dtype is not None
            else torch.autocast("cuda", enabled=False)
        )
        with ctx:
            out = model(input_ids=ids, labels=labels)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    timed = times[2:]
    del opt
    return batch * seq * len(timed) / sum(timed)


def bert(name, layers, hidden, heads, ffn, vocab, batch, seq, autocast_dtype=None):
    from transformers import BertConfig, BertForSequenceClassification

    peak_reset()
    cfg = BertConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ffn,
        max_position_embeddings=512,
        num_labels=2,
    )
    cfg._attn_implementation = "eager"
    model = BertForSequenceClassification(cfg).cuda()
    tps = train_steps(model, batch, seq, vocab, 8, autocast_dtype)
    peak = torch.cuda.max_memory_allocated()
    del model
    return {
        "case": name,
        "peak_gib": gib(peak),
        "tokens_per_s": tps,
        "batch": batch,
        "seq": seq,
        "precision": "fp32" if autocast_dtype is None else "amp_bf16",
        "params": None,
    }


def llama_config():
    from transformers import LlamaConfig

    # Llama-3.1-8B's published shape (config.json of meta-llama/Llama-3.1-8B).
    return LlamaConfig(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        tie_word_embeddings=False,
    )


def llama(dtype):
    from transformers import LlamaForCausalLM

    cfg = llama_config()
    cfg._attn_implementation = "sdpa"
    torch.set_default_dtype(dtype)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    return model


def lora_8b(batch, seq):
    from peft import LoraConfig, get_peft_model

    peak_reset()
    model = llama(torch.bfloat16)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.enable_input_require_grads()
    cfg = LoraConfig(
        r=8,
        lora_alpha=16,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, cfg)
    adapter_dtypes = sorted({str(p.dtype) for p in model.parameters() if p.requires_grad})
    tps = train_steps(model, batch, seq, 128256, 6, None, labels_kind="lm")
    peak = torch.cuda.max_memory_allocated()
    del model
    return {
        "case": "llama-3.1-8b-lora",
        "peak_gib": gib(peak),
        "tokens_per_s": tps,
        "batch": batch,
        "seq": seq,
        "precision": "bf16",
        "adapter_dtypes": adapter_dtypes,
    }


@torch.no_grad()
def prefill_8b(tokens, chunk=8192):
    from transformers import DynamicCache

    peak_reset()
    model = llama(torch.bfloat16)
    model.eval()
    weights = torch.cuda.memory_allocated()
    cache = DynamicCache()
    ids = torch.randint(0, 128256, (1, tokens), device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for start in range(0, tokens, chunk):
        piece = ids[:, start : start + chunk]
        model(input_ids=piece, past_key_values=cache, use_cache=True, logits_to_keep=1)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated()
    after = torch.cuda.memory_allocated()
    del model, cache
    return {
        "case": f"llama-3.1-8b-prefill-{tokens}",
        "peak_gib": gib(peak),
        "weights_gib": gib(weights),
        "kv_gib": gib(after - weights),
        "prefill_tokens_per_s": tokens / secs,
        "tokens": tokens,
        "chunk": chunk,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="planner-gpu.json")
    args = ap.parse_args()
    import transformers
    import peft

    env = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
    }
    print(json.dumps(env), flush=True)
    results = {"env": env, "cases": []}
    runs = [
        lambda: bert("bert-large-fp32", 24, 1024, 16, 4096, 30522, 8, 512),
        lambda: bert("bert-large-amp-bf16", 24, 1024, 16, 4096, 30522, 8, 512, torch.bfloat16),
        lambda: bert("bert-base-cased-fp32", 12, 768, 12, 3072, 28996, 32, 128),
        lambda: lora_8b(2, 2048),
        lambda: prefill_8b(65536),
        lambda: prefill_8b(131072),
    ]
    for run in runs:
        try:
            r = run()
        except Exception as e:  # one failed case must not lose the others
            r = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(r), flush=True)
        results["cases"].append(r)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
