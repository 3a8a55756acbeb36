#!/usr/bin/env python3
"""Builds the Hugging Face reference fixtures for tests/llm/reference_test.cc.

Needs torch and transformers (written for 5.x, works with 4.4x); runs on the CPU in fp32 in a
few seconds:

    python3 scripts/make_llm_fixtures.py --out tests/fixtures/llm

For each tiny random model it writes <out>/<name>/ with config.json, the safetensors weights
(as transformers' save_pretrained writes them) and reference.json:

    prompt_ids   the prompt (11 tokens: not a multiple of 8, so the engine pads it)
    last_logits  fp32 logits of the prompt's last position
    greedy_ids   16 greedy tokens, each from a full forward pass without a cache
    min_margin   smallest top-1 minus top-2 logit gap over the greedy steps

Weights are random but scaled up from transformers' 0.02 init (std 1/sqrt(fan_in) for linear
layers, 1 for embeddings, norm weights spread around their neutral value) so that logits span
several units and greedy choices are not coin flips; seeds are tried until every step's
top-1/top-2 gap is clear. The reference is computed on the model reloaded from disk, so it is
exactly the model the engine loads.
"""

import argparse
import json
import math
import os
import shutil
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, GemmaConfig, GemmaForCausalLM, LlamaConfig, LlamaForCausalLM

PROMPT_LEN = 11
NEW_TOKENS = 16
# Engine and transformers agree to ~1e-5 of the logit scale; a gap 100x that is a clear choice.
MIN_MARGIN_ABS = 0.02  # logit units
MIN_MARGIN_REL = 2e-3  # of max(1, largest |logit|)
MAX_BYTES = 1 << 20


def rope_kwargs(config_cls, theta):
    # transformers 5 takes rope_parameters; 4.x takes rope_theta.
    import inspect

    if "rope_parameters" in inspect.signature(config_cls.__init__).parameters:
        return {"rope_parameters": {"rope_type": "default", "rope_theta": theta}}
    return {"rope_theta": theta}


def make_config(name):
    common = dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=103,  # odd on purpose
        num_hidden_layers=2,
        max_position_embeddings=128,
        attention_bias=False,
    )
    if name == "llama_gqa":
        return LlamaForCausalLM, LlamaConfig(
            **common, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, hidden_act="silu",
            tie_word_embeddings=False, **rope_kwargs(LlamaConfig, 500.0)), torch.float32, None
    if name == "gemma_mqa":
        return GemmaForCausalLM, GemmaConfig(
            **common, num_attention_heads=4, num_key_value_heads=1, head_dim=32, rms_norm_eps=1e-6,
            hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, pad_token_id=0, bos_token_id=2,
            eos_token_id=1, **rope_kwargs(GemmaConfig, 10000.0)), torch.float32, None
    if name == "llama_tied_sharded":
        # Tied embeddings, explicit head_dim (q_dim 96 != hidden 64), MQA, bf16 storage, shards.
        return LlamaForCausalLM, LlamaConfig(
            **common, num_attention_heads=4, num_key_value_heads=1, head_dim=24, rms_norm_eps=1e-6,
            hidden_act="silu", tie_word_embeddings=True, **rope_kwargs(LlamaConfig, 10000.0)), torch.bfloat16, "100KB"
    raise ValueError(name)


def randomize(model, gemma, seed, resid_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:  # RMSNorm weights: Gemma multiplies by (1 + w), Llama by w
                base = 0.0 if gemma else 1.0
                p.copy_(base + 0.3 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in pname or "lm_head" in pname:
                # Gemma multiplies embeddings by sqrt(hidden): start them at 1/sqrt(hidden) so the
                # residual stream is not all embedding (greedy would just repeat the last token).
                std = 1.0 / math.sqrt(p.shape[1]) if gemma and "embed_tokens" in pname else 1.0
                p.copy_(std * torch.randn(p.shape, generator=g))
            else:
                # Layers that write into the residual stream can be scaled up, so that with tied
                # embeddings the stream is not dominated by the current token's own embedding
                # (greedy would then repeat it forever).
                scale = resid_scale if ("o_proj" in pname or "down_proj" in pname) else 1.0
                p.copy_(scale * torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))


def reference(model, prompt):
    with torch.no_grad():
        seq = list(prompt)
        last_logits = None
        greedy, margins = [], []
        for step in range(NEW_TOKENS):
            logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1].float()
            if step == 0:
                last_logits = logits.tolist()
            top = torch.topk(logits, 2).values
            gap = float(top[0] - top[1])
            margins.append((gap, gap / max(1.0, float(logits.abs().max()))))  # (absolute, relative)
            t = int(torch.argmax(logits))
            greedy.append(t)
            seq.append(t)
    return last_logits, greedy, margins


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def build(name, out_root):
    model_cls, config, store_dtype, shard = make_config(name)
    gemma = model_cls is GemmaForCausalLM
    out = os.path.join(out_root, name)
    attempts = [(r, seed) for r in (1.0, 2.0, 4.0) for seed in range(1, 80)]
    for resid_scale, seed in attempts:
        torch.manual_seed(seed)
        model = model_cls(config).to(torch.float32).eval()
        randomize(model, gemma, seed, resid_scale)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(out)
        kwargs = {}  # safetensors is the default (and in transformers 5 the only) format
        if shard:
            kwargs["max_shard_size"] = shard
        model.to(store_dtype).save_pretrained(out, **kwargs)
        # The reference runs on what was saved (bf16 weights widened to fp32, like the engine).
        try:
            loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
        except TypeError:  # transformers 4.x
            loaded = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32, attn_implementation="eager")
        loaded = loaded.to(torch.float32).eval()
        gen = torch.Generator().manual_seed(1000 + seed)
        prompt = torch.randint(3, config.vocab_size, (PROMPT_LEN,), generator=gen).tolist()
        last_logits, greedy, margins = reference(loaded, prompt)
        worst_abs = min(m[0] for m in margins)
        worst_rel = min(m[1] for m in margins)
        if worst_abs < MIN_MARGIN_ABS or worst_rel < MIN_MARGIN_REL:
            continue
        if len(set(greedy)) < 3:  # a continuation stuck on one token tests little of decode
            continue
        ref = {
            "model": name,
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
            "seed": seed,
            "residual_scale": resid_scale,
            "storage_dtype": str(store_dtype).replace("torch.", ""),
            "prompt_ids": prompt,
            "last_logits": last_logits,
            "greedy_ids": greedy,
            "min_margin": worst_abs,
            "min_relative_margin": worst_rel,
        }
        with open(os.path.join(out, "reference.json"), "w") as f:
            json.dump(ref, f, indent=1)
            f.write("\n")
        size = dir_bytes(out)
        if size > MAX_BYTES:
            sys.exit(f"{out}: {size} bytes, over the 1 MB fixture limit")
        files = sorted(os.listdir(out))
        print(f"{name}: seed {seed}, min margin {worst_abs:.3f} ({worst_rel:.4f} relative), {size} bytes: {files}")
        return
    sys.exit(f"{name}: no seed gave clear greedy margins")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures/llm", help="fixture root (one folder per model)")
    ap.add_argument("--only", default="", help="build only this model")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    failed = []
    for name in ["llama_gqa", "gemma_mqa", "llama_tied_sharded"]:
        if not args.only or args.only == name:
            try:
                build(name, args.out)
            except SystemExit as e:  # report, and still build the others
                print(e, file=sys.stderr)
                failed.append(name)
    if failed:
        sys.exit(f"no fixture for: {', '.join(failed)}")


if __name__ == "__main__":
    main()
