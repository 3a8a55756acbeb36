#!/usr/bin/env python3
"""The 34 bf16 shapes of `tunableop bench --suite llm` as PyTorch runs them: F.linear(x, W) with
x [tokens, in] and W [out, in] (cuBLAS sees "tn_<out>_<tokens>_<in>"), timed by CUDA graph replay
of many calls over rotating inputs whose total exceeds the L2 cache, so no call finds its
weights in cache. An ordinary PyTorch program: run it plain, with PYTORCH_TUNABLEOP_ENABLED=1, or
under `tunableop run`; each shape is called once eagerly before the capture (where tuners tune).
  python3 linear_suite.py [--only SUBSTRING] [--csv FILE]
prints one line per shape: "shape,m,n,k,ms_per_call" (m = out, n = tokens, k = in)
"""
import argparse
import math
import sys

import torch
import torch.nn.functional as F

LLAMA = [("llama2-7b.qkv", 12288, 4096), ("llama2-7b.o", 4096, 4096), ("llama2-7b.gate_up", 22016, 4096),
         ("llama2-7b.down", 4096, 11008), ("llama2-7b.lm_head", 32000, 4096)]
GEMMA = [("gemma-2b.qkv", 2560, 2048), ("gemma-2b.o", 2048, 2048), ("gemma-2b.gate_up", 32768, 2048),
         ("gemma-2b.down", 2048, 16384), ("gemma-2b.lm_head", 256000, 2048)]


def suite():
    """Same order and names as tools/bench_suites.cc's "llm" suite."""
    shapes = []
    for tokens in (1, 8, 2048):
        for name, out, inp in LLAMA + GEMMA:
            shapes.append((f"{name}@{tokens}", out, tokens, inp))
    for tokens in (1, 2048):
        shapes.append((f"vocab50257@{tokens}", 50257, tokens, 4096))
        shapes.append((f"vocab32001@{tokens}", 32001, tokens, 4096))
    return shapes


def time_shape(out, tokens, inp, l2_bytes, target_ms=25.0):
    set_bytes = 2 * (out * inp + tokens * inp + out * tokens)
    rotations = max(2, math.ceil(2 * l2_bytes / set_bytes))
    ws = [torch.randn(out, inp, device="cuda", dtype=torch.bfloat16) for _ in range(rotations)]
    xs = [torch.randn(tokens, inp, device="cuda", dtype=torch.bfloat16) for _ in range(rotations)]
    for w, x in zip(ws, xs):  # eager first: tuners see the problem outside a capture
        F.linear(x, w)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for w, x in zip(ws, xs):
            F.linear(x, w)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ys = [F.linear(x, w) for w, x in zip(ws, xs)]
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    graph.replay()
    stop.record()
    torch.cuda.synchronize()
    once = max(start.elapsed_time(stop), 1e-3)
    replays = max(3, min(200, int(target_ms / once)))
    start.record()
    for _ in range(replays):
        graph.replay()
    stop.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(stop) / (replays * rotations)
    del ys, graph, ws, xs
    torch.cuda.empty_cache()
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--csv", default="")
    a = ap.parse_args()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    lines = []
    for name, out, tokens, inp in suite():
        if a.only and a.only not in name:
            continue
        ms = time_shape(out, tokens, inp, l2)
        line = f"{name},{out},{tokens},{inp},{ms:.5f}"
        print(line, flush=True)
        lines.append(line)
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("shape,m,n,k,ms_per_call\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
