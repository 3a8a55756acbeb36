#!/usr/bin/env python3
"""Seed Example 2, unmodified for the interposer: Hugging Face transformers generating with a
Gemma-2B-shaped model (random weights: no download), bf16, static KV cache, a prompt of 8 tokens
(padded to a multiple of 8), 256 tokens in all, batch 1, greedy. --model llama-2-7b: the same with
Llama-2-7B's shape (the engine benchmark's other peer line).
  python3 hf_gemma_generate.py [--model gemma-2b|llama-2-7b] [--eager] [--batches N] [--warmup N] [--layers N]
--eager turns off transformers' compilation of the decode step (default: compiled, as
transformers does for a static cache). Prints "Tokens/second: <x> (<tokens> tokens, <s> seconds)".
"""
import argparse
import time

import torch
import torch._dynamo
import transformers
from transformers import GemmaConfig, GemmaForCausalLM, LlamaConfig, LlamaForCausalLM


def gemma_2b_config(layers):
    kw = dict(vocab_size=256000, hidden_size=2048, intermediate_size=16384, num_hidden_layers=layers,
              num_attention_heads=8, num_key_value_heads=1, head_dim=256, max_position_embeddings=8192,
              rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", pad_token_id=0, bos_token_id=2,
              eos_token_id=1, tie_word_embeddings=True)
    return GemmaConfig(**kw)


def llama_2_7b_config(layers):
    kw = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=layers,
              num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096, rms_norm_eps=1e-5,
              hidden_act="silu", pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    return LlamaConfig(**kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eager", action="store_true")
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--model", choices=["gemma-2b", "llama-2-7b"], default="gemma-2b")
    ap.add_argument("--layers", type=int, default=0, help="default: the model's (18 Gemma-2B, 32 Llama-2-7B)")
    ap.add_argument("--seq-len", type=int, default=256)
    a = ap.parse_args()
    torch.manual_seed(0)
    gemma = a.model == "gemma-2b"
    layers = a.layers or (18 if gemma else 32)
    config = gemma_2b_config(layers) if gemma else llama_2_7b_config(layers)
    with torch.device("cuda"):
        # Built in bf16 directly: Llama-2-7B in fp32 first would need 27 GB for nothing.
        torch.set_default_dtype(torch.bfloat16)
        model = (GemmaForCausalLM if gemma else LlamaForCausalLM)(config).to(torch.bfloat16)
        torch.set_default_dtype(torch.float32)
    model.eval()
    model.generation_config.cache_implementation = "static"
    if a.eager:
        model.generation_config.disable_compile = True
        torch._dynamo.config.disable = True  # belt and braces, should a transformers version ignore the flag
    # A random prompt of 8 tokens (the seed pads "Hello Earthlings!" to a multiple of 8).
    ids = torch.randint(3, config.vocab_size, (1, 8), device="cuda")
    mask = torch.ones_like(ids)
    n_tokens = a.seq_len - ids.shape[1]
    t0 = t1 = None
    with torch.no_grad():
        for i in range(a.batches + a.warmup):
            if i == a.warmup:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n_tokens, min_new_tokens=n_tokens,
                           do_sample=False, use_cache=True, pad_token_id=0)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
    dt = t1 - t0
    print(f"  Tokens/second: {a.batches * n_tokens / dt:0.4f} ({n_tokens * a.batches} tokens, {dt:0.2f} seconds)"
          f" [transformers {transformers.__version__}, {a.model}, {'eager' if a.eager else 'compiled decode'}]")


if __name__ == "__main__":
    main()
