#!/usr/bin/env python3
"""The short table bench/lab/gpu-decode.sh prints last (issue 13), read from its logs:

  python3 bench/lab/decode_summary.py LOGS_DIR

LOGS_DIR holds <model>_<before|after|v<N>>_b<batch>.txt (`tunableop llm` outputs; v<N>: step
variant N forced) and
hf_<model>_<compiled|eager>.txt (bench/interpose/hf_gemma_generate.py). Per engine run: TPOT,
tokens/s per sequence and in total, decode weight GB/s, its share of the copy ceiling measured
in the same run, the decode attention span of the profiled step and the solution the attention
op chose, and the step variant kept with its graph replay time. Missing runs print as skipped.
"""
import os
import re
import sys

MODELS = ["gemma-2b", "llama-2-7b"]
BATCHES = [1, 4, 16]


def grab(pattern, text, group=1, cast=float):
    m = re.search(pattern, text, re.M)
    return cast(m.group(group)) if m else None


def engine_row(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    r = {
        "tpot": grab(r"TPOT: ([0-9.]+) ms", text),
        "per_seq": grab(r"TPOT: [0-9.]+ ms \(([0-9.]+) tokens/s per sequence", text),
        "total": grab(r"tokens/s per sequence, ([0-9.]+) in total", text),
        "gbps": grab(r"Decode: [0-9.]+ MB of weights per step, ([0-9.]+) GB/s", text),
        "copy": grab(r"Copy ceiling: ([0-9.]+) GB/s", text),
        "attn_us": grab(r"^\s+attention\s+\d+\s+([0-9.]+)", text),
        "attn": grab(r"decode attention \S+: (\S+)", text, cast=str),
        "step": grab(r"decode step, batch \d+: ([^(]+?) \(([0-9.]+) us", text, cast=str),
        "step_us": grab(r"decode step, batch \d+: [^(]+? \(([0-9.]+) us", text),
        "error": None,
    }
    if r["tpot"] is None:
        lines = [l for l in text.splitlines() if l.strip()]
        r["error"] = lines[-1][:100] if lines else "empty log"
    return r


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    logs = sys.argv[1] if len(sys.argv) > 1 else "."
    print("| model | run | batch | TPOT ms | tok/s per seq | tok/s total | decode GB/s | % of copy ceiling "
          "| attention us/step (profile) | decode attention | step kept (graph replay us) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    forced = sorted({f.split("_")[1] for f in os.listdir(logs) if re.match(r"[\w.-]+_v\d+_b1\.txt$", f)},
                    key=lambda v: int(v[1:]))  # step variants forced (DECODE_VARIANTS)
    for model in MODELS:
        for run in ["before", "after"] + forced:
            for b in BATCHES:
                path = os.path.join(logs, f"{model}_{run}_b{b}.txt")
                if not os.path.exists(path):
                    continue
                r = engine_row(path)
                if r["error"]:
                    print(f"| {model} | {run} | {b} | failed: {r['error']} ||||||||")
                    continue
                pct = 100 * r["gbps"] / r["copy"] if r["gbps"] and r["copy"] else None
                step = f"{r['step']} ({fmt(r['step_us'], '.1f')})" if r["step"] else "-"
                print(f"| {model} | {run} | {b} | {fmt(r['tpot'], '.3f')} | {fmt(r['per_seq'], '.1f')} | "
                      f"{fmt(r['total'], '.1f')} | {fmt(r['gbps'], '.0f')} | {fmt(pct, '.1f')} | "
                      f"{fmt(r['attn_us'], '.1f')} | {r['attn'] or '-'} | {step} |")
    peers = []
    for model in MODELS:
        for mode in ["compiled", "eager"]:
            path = os.path.join(logs, f"hf_{model}_{mode}.txt")
            if os.path.exists(path):
                v = grab(r"Tokens/second: ([0-9.]+)", open(path, encoding="utf-8", errors="replace").read())
                peers.append(f"{model} {mode} {fmt(v, '.1f') if v else 'failed'}")
    if peers:
        print("Hugging Face transformers, tokens/s (seed Example 2, batch 1): " + "; ".join(peers))
    seed = []
    for model in MODELS:
        path = os.path.join(logs, f"{model}_after_b1.txt")
        if os.path.exists(path):
            v = grab(r"Tokens/second: ([0-9.]+)", open(path, encoding="utf-8", errors="replace").read())
            if v:
                seed.append(f"{model} {v:.1f}")
    if seed:
        print("Ours, the seed's Tokens/second line (after, batch 1): " + "; ".join(seed))


if __name__ == "__main__":
    main()
