#!/usr/bin/env python3
"""The peer of `tunableop bench serve`: Hugging Face transformers' continuous batching
(`generate_batch`, paged attention) on the same requests, in the same device call.

Reads the workload `tunableop bench serve --save-workload FILE` wrote (a JSON list of
{"prompt": [ids], "max_tokens": n}), builds a model of the given shape with random weights
(bf16, on the GPU; no download), runs the first --requests of them through generate_batch with
exactly max_tokens new tokens each (eos_token_id -1, min_new_tokens = max_new_tokens: lengths are
exact, as with ignore_eos), after a warm-up batch, and prints one JSON line: output tokens,
seconds, output tokens/s, requests.

Each request keeps its own length through transformers' continuous batching manager
(`init_continuous_batching`, `add_request(..., max_new_tokens=n)`): what generate_batch runs
underneath, with per-request limits. Where the manager is missing, generate_batch runs every
request to the batch's longest max_tokens and only each request's own max_tokens count as output
(the JSON says which way it ran).
"""
import argparse
import json
import sys
import time


def model_config(name):
    from transformers import LlamaConfig
    if name == "llama-2-7b":
        return LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                           num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                           rms_norm_eps=1e-5, rope_theta=10000.0, torch_dtype="bfloat16")
    if name == "tiny":
        return LlamaConfig(vocab_size=8192, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                           num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048,
                           rms_norm_eps=1e-5, torch_dtype="bfloat16")
    raise SystemExit(f"unknown model {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True)
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=8)
    args = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    work = json.load(open(args.workload))[: args.requests]
    cfg = model_config(args.model)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    model.eval()
    model.set_attn_implementation("paged|sdpa")
    longest = max(w["max_tokens"] for w in work)

    def config(n):
        return GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=-1, pad_token_id=0)

    def run_batch(reqs, n):
        out = model.generate_batch(inputs=[r["prompt"] for r in reqs], generation_config=config(n), progress_bar=False)
        return sum(len(v.generated_tokens) for v in out.values())

    def run_manager(reqs):
        manager = model.init_continuous_batching(generation_config=config(longest))
        manager.start()
        for i, r in enumerate(reqs):
            manager.add_request(input_ids=r["prompt"], request_id=f"r{i}", max_new_tokens=r["max_tokens"])
        produced, done = 0, 0
        while done < len(reqs):
            res = manager.get_result(timeout=600)
            if res is None:
                raise SystemExit("hf: no result within 600 s")
            produced += len(res.generated_tokens)
            done += 1
        manager.stop(block=True)
        return produced

    t = time.time()
    run_batch(work[: args.warmup], 16)
    warm = time.time() - t
    torch.cuda.synchronize()
    way = "manager (per-request max_new_tokens)"
    t = time.time()
    try:
        produced = run_manager(work)
    except (AttributeError, TypeError) as e:
        way = f"generate_batch to the longest max_tokens ({e.__class__.__name__}: {e})"
        t = time.time()
        produced = run_batch(work, longest)
    torch.cuda.synchronize()
    secs = time.time() - t
    wanted = sum(w["max_tokens"] for w in work)
    print(json.dumps({"peer": "hf generate_batch", "transformers": __import__("transformers").__version__,
                      "model": args.model, "way": way, "requests": len(work), "output_tokens": wanted,
                      "generated_tokens": produced, "seconds": secs, "warmup_seconds": warm,
                      "output_tokens_per_s": wanted / secs, "generated_tokens_per_s": produced / secs}))


if __name__ == "__main__":
    sys.exit(main())
