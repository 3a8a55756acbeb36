#!/usr/bin/env python3
"""The 34 bf16 shapes of `tunableop bench --suite llm` as PyTorch runs them: F.linear(x, W) with
x [tokens, in] and W [out, in] (cuBLAS sees "tn_<out>_<tokens>_<in>"), timed by CUDA graph replay
of many calls over rotating inputs whose total exceeds the L2 cache, so no call finds its
weights in cache. An ordinary PyTorch program: run it plain, with PYTORCH_TUNABLEOP_ENABLED=1, or
under `tunableop run`; each shape is called once eagerly before the capture (where tuners tune).
  python3 linear_suite.py [--only SUBSTRING] [--csv FILE]
prints one line per shape: "shape,m,n,k,ms_per_call" (m = out, n = tokens, k = in)

  tunableop run --no-tune --results R.csv -- python3 linear_suite.py --ab
times PyTorch's own calls against ours in one process (separate processes differ by a few
percent from noise alone): per shape, one graph captured with the interposer switched off
(tunableop_interpose_set_enabled, exported by the preload library) and one with it on, replayed
in alternation for several rounds; prints "shape,m,n,k,plain_ms,ours_ms,max_rel_diff" (medians;
the last column compares the two graphs' outputs).
"""
import argparse
import math
import statistics
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
    graph, ys = capture(ws, xs)
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


def interposer_switch():
    """tunableop_interpose_set_enabled from the preload library, or None when not preloaded."""
    import ctypes
    try:
        fn = ctypes.CDLL(None).tunableop_interpose_set_enabled
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = None
    return fn


def capture(ws, xs):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for w, x in zip(ws, xs):
            F.linear(x, w)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ys = [F.linear(x, w) for w, x in zip(ws, xs)]
    return graph, ys


def time_shape_ab(out, tokens, inp, l2_bytes, switch, rounds=7, target_ms=10.0):
    """(plain_ms, ours_ms, max_rel_diff): both graphs in one process, replayed in alternation."""
    set_bytes = 2 * (out * inp + tokens * inp + out * tokens)
    rotations = max(2, math.ceil(2 * l2_bytes / set_bytes))
    ws = [torch.randn(out, inp, device="cuda", dtype=torch.bfloat16) for _ in range(rotations)]
    xs = [torch.randn(tokens, inp, device="cuda", dtype=torch.bfloat16) for _ in range(rotations)]
    switch(1)
    for w, x in zip(ws, xs):  # eager first: the interposer sees (and with tuning on, tunes) the problem
        F.linear(x, w)
    torch.cuda.synchronize()
    g_ours, ys_ours = capture(ws, xs)
    switch(0)
    try:
        g_plain, ys_plain = capture(ws, xs)
    finally:
        switch(1)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def sample(graph, replays):
        start.record()
        for _ in range(replays):
            graph.replay()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / (replays * rotations)

    g_plain.replay()
    g_ours.replay()
    torch.cuda.synchronize()
    diff = max(float((a.float() - b.float()).abs().max() / (a.float().abs().max() + 1e-6))
               for a, b in zip(ys_plain, ys_ours))
    once = max(sample(g_plain, 1) * rotations, 1e-3)
    replays = max(2, min(100, int(target_ms / once)))
    plain, ours = [], []
    for r in range(rounds):
        for graph, acc in ((g_plain, plain), (g_ours, ours)) if r % 2 == 0 else ((g_ours, ours), (g_plain, plain)):
            acc.append(sample(graph, replays))
    del ys_ours, ys_plain, g_ours, g_plain, ws, xs
    torch.cuda.empty_cache()
    return statistics.median(plain), statistics.median(ours), diff


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--csv", default="")
    ap.add_argument("--ab", action="store_true", help="PyTorch's calls against ours, in this process")
    a = ap.parse_args()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    if a.ab:
        switch = interposer_switch()
        if switch is None:
            print("--ab needs the preload library (run under tunableop run): skipped")
            return 77
        for name, out, tokens, inp in suite():
            if a.only and a.only not in name:
                continue
            plain, ours, diff = time_shape_ab(out, tokens, inp, l2, switch)
            print(f"{name},{out},{tokens},{inp},{plain:.5f},{ours:.5f},{diff:.2e}", flush=True)
        return 0
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
