#!/usr/bin/env python3
"""Builds the Hugging Face reference fixtures for tests/llm/reference_test.cc.

Needs torch and transformers (written for 5.x; the older families also build with 4.4x); runs on
the CPU in fp32 in well under a minute and prints a summary table:

    python3 scripts/make_llm_fixtures.py --out tests/fixtures/llm

The models (each folder under 2 MB):
    llama_gqa           Llama, GQA, untied
    gemma_mqa           Gemma, MQA, head_dim 32 over hidden 64, tied
    llama_tied_sharded  Llama, tied, explicit head_dim, bf16 storage, two shards
    llama3_rope         Llama 3: rope_type llama3 (all three frequency bands), GQA, a vocabulary of
                        8192 (tied, bf16: large enough for several blocks of the argmax, small in bytes)
    mistral_window      Mistral: a sliding window of 5 under an 11-token prompt and 16 new tokens
    qwen2_bias          Qwen2: q/k/v biases, tied embeddings, rope_type yarn
    qwen3_qknorm        Qwen3: q/k RMSNorm per head, explicit head_dim 24 over hidden 64, MQA
    gemma2_softcap      Gemma-2: attention and final softcapping that bend the values, pre- and
                        post-norms, 3 layers alternating a window of 6 and full attention,
                        query_pre_attn_scalar 24 (head_dim 32)

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
MAX_BYTES = 2 * 1000 * 1000 - 1  # per fixture folder

FAMILIES = ["llama3_rope", "mistral_window", "qwen2_bias", "qwen3_qknorm", "gemma2_softcap"]
ALL = ["llama_gqa", "gemma_mqa", "llama_tied_sharded"] + FAMILIES


def rope_kwargs(config_cls, theta, scaling=None):
    # transformers 5 takes rope_parameters; 4.x takes rope_theta (and rope_scaling).
    import inspect

    if "rope_parameters" in inspect.signature(config_cls.__init__).parameters:
        params = {"rope_type": "default", "rope_theta": theta}
        params.update(scaling or {})
        return {"rope_parameters": params}
    if scaling:
        return {"rope_theta": theta, "rope_scaling": dict(scaling)}
    return {"rope_theta": theta}


def make(config_cls, **kw):
    """config_cls(**kw), leaving out what the class does not take (attention_bias for Mistral and
    Qwen2, say) when its constructor accepts no **kwargs (transformers' strict config classes)."""
    import inspect

    params = inspect.signature(config_cls.__init__).parameters
    if not any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kw = {k: v for k, v in kw.items() if k in params}
    return config_cls(**kw)


def features(config):
    """What the fixture exercises, as the saved config says (checked in the summary)."""
    out = []
    for key in ("sliding_window", "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar",
                "head_dim"):
        v = getattr(config, key, None)
        if v is not None:
            out.append(f"{key}={v}")
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", "default") != "default":
        out.append(f"rope={rope['rope_type']}")
    types = getattr(config, "layer_types", None)
    if types and any(t != "full_attention" for t in types):
        out.append("layers=" + "".join("s" if t == "sliding_attention" else "f" for t in types))
    if getattr(config, "tie_word_embeddings", False):
        out.append("tied")
    return " ".join(out)


def family_config(name, common):
    """The newer families (transformers 5.x: Qwen3 needs 4.51+, the rope_parameters form 5.x)."""
    from transformers import (Gemma2Config, Gemma2ForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                              Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

    if name == "llama3_rope":
        # theta 10000 over head_dim 16 and an original context of 32: frequency 0 keeps its
        # wavelength (6.3 < 32 / 4), 1 is smoothed (19.9), the rest are divided by the factor.
        llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 32}
        c = dict(common, vocab_size=8192)
        return LlamaForCausalLM, make(LlamaConfig,
            **c, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, hidden_act="silu",
            tie_word_embeddings=True, **rope_kwargs(LlamaConfig, 10000.0, llama3)), torch.bfloat16, None
    if name == "mistral_window":
        return MistralForCausalLM, make(MistralConfig,
            **common, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, hidden_act="silu",
            sliding_window=5, tie_word_embeddings=False, **rope_kwargs(MistralConfig, 10000.0)), torch.float32, None
    if name == "qwen2_bias":
        yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
        c = dict(common, max_position_embeddings=64)  # = factor x original: transformers' own check
        return Qwen2ForCausalLM, make(Qwen2Config,
            **c, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6, hidden_act="silu",
            use_sliding_window=False, tie_word_embeddings=True, **rope_kwargs(Qwen2Config, 10000.0, yarn)), \
            torch.float32, None
    if name == "qwen3_qknorm":
        return Qwen3ForCausalLM, make(Qwen3Config,
            **common, num_attention_heads=4, num_key_value_heads=1, head_dim=24, rms_norm_eps=1e-6,
            hidden_act="silu", use_sliding_window=False, tie_word_embeddings=False,
            **rope_kwargs(Qwen3Config, 1000000.0)), torch.float32, None
    if name == "gemma2_softcap":
        c = dict(common, num_hidden_layers=3)
        return Gemma2ForCausalLM, make(Gemma2Config,
            **c, num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
            hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, pad_token_id=0, bos_token_id=2,
            eos_token_id=1, query_pre_attn_scalar=24, sliding_window=6, attn_logit_softcapping=2.0,
            final_logit_softcapping=5.0, **rope_kwargs(Gemma2Config, 10000.0)), torch.float32, None
    raise ValueError(name)


def make_config(name):
    common = dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=103,  # odd on purpose
        num_hidden_layers=2,
        max_position_embeddings=128,
        attention_bias=False,
    )
    if name in FAMILIES:
        return family_config(name, common)
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
            if pname.endswith(".bias"):  # Qwen2's q, k, v biases: of the projections' own scale
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:  # RMSNorm weights: Gemma multiplies by (1 + w), Llama (and Qwen3's q/k norms) by w
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
    gemma = config.model_type in ("gemma", "gemma2")
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
        last_logits = [float(f"{v:.8g}") for v in last_logits]  # 8 digits: far inside the tests' tolerance
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
            sys.exit(f"{out}: {size} bytes, over the {MAX_BYTES} byte fixture limit")
        return {"seed": seed, "margin": worst_abs, "relative": worst_rel, "bytes": size,
                "files": len(os.listdir(out)), "model_type": config.model_type, "features": features(loaded.config)}
    if os.path.isdir(out):
        shutil.rmtree(out)  # no half-made fixture left behind
    sys.exit(f"{name}: no seed gave clear greedy margins")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures/llm", help="fixture root (one folder per model)")
    ap.add_argument("--only", default="", help="build only these models (comma-separated)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    wanted = [n for n in args.only.split(",") if n] or ALL
    unknown = [n for n in wanted if n not in ALL]
    if unknown:
        sys.exit(f"unknown fixture(s) {', '.join(unknown)}; known: {', '.join(ALL)}")
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    rows, failed = [], []
    for name in wanted:
        try:
            r = build(name, args.out)
            rows.append((name, r))
        except (Exception, SystemExit) as e:  # report, and still build the others
            print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(name)
    print(f"{'fixture':20} {'model_type':11} {'seed':>4} {'margin':>7} {'relative':>8} {'bytes':>9}  features")
    for name, r in rows:
        print(f"{name:20} {r['model_type']:11} {r['seed']:4d} {r['margin']:7.3f} {r['relative']:8.4f} {r['bytes']:9d}  "
              f"{r['features']}")
    if failed:
        sys.exit(f"no fixture for: {', '.join(failed)}")


if __name__ == "__main__":
    main()
