#!/usr/bin/env python3
"""The FP8 suite as PyTorch runs it: the shapes of `tunableop bench --suite llm-fp8` through
torch._scaled_mm(x, W.t(), scale_a, scale_b, out_dtype=bfloat16), x [tokens, in] and W [out, in]
in float8_e4m3fn, per-token and per-output-channel scales (--mode rowwise, the default) or one
scale each (--mode tensorwise). cuBLASLt sees "tn_<out>_<tokens>_<in>". Timed by CUDA graph replay
over rotating inputs larger than twice the L2 cache (no call finds its weights in cache); each
shape is called once eagerly first (where tuners tune). An ordinary PyTorch program: run it plain,
with PYTORCH_TUNABLEOP_ENABLED=1, or under `tunableop run`.
  python3 scaled_mm_suite.py [--mode rowwise|tensorwise] [--only SUBSTRING] [--csv FILE]
prints "shape,m,n,k,ms_per_call" per shape ("skipped" for shapes torch._scaled_mm refuses: a
dimension that is not a multiple of 16), and with PYTORCH_TUNABLEOP_ENABLED=1 what PyTorch's own
tuner chose (torch.cuda.tunable.get_results()).
  python3 scaled_mm_suite.py --summarize plain.csv ours.csv [pytorch.csv]
prints the markdown table of those runs (speedups over the first) and the geomean.
"""
import argparse
import math
import os
import statistics
import sys

def make_inputs(torch, out, tokens, inp, rowwise, rotations):
    f8 = torch.float8_e4m3fn
    ws, xs, sws, sxs = [], [], [], []
    for _ in range(rotations):
        w = torch.randn(out, inp, device="cuda")
        x = torch.randn(tokens, inp, device="cuda")
        if rowwise:  # one scale per output channel / per token: amax -> 448
            sw = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 448.0
            sx = x.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 448.0
        else:
            sw = (w.abs().amax() / 448.0).reshape(())
            sx = (x.abs().amax() / 448.0).reshape(())
        ws.append((w / sw).to(f8))
        xs.append((x / sx).to(f8))
        sws.append(sw.reshape(1, out).float().contiguous() if rowwise else sw.float())
        sxs.append(sx.reshape(tokens, 1).float().contiguous() if rowwise else sx.float())
    return ws, xs, sws, sxs


def scaled_mm(torch, x, w, sx, sw):
    return torch._scaled_mm(x, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)


def time_shape(torch, out, tokens, inp, rowwise, l2_bytes, target_ms=25.0):
    set_bytes = out * inp + tokens * inp + 2 * out * tokens
    rotations = max(2, math.ceil(2 * l2_bytes / set_bytes))
    ws, xs, sws, sxs = make_inputs(torch, out, tokens, inp, rowwise, rotations)
    args = list(zip(xs, ws, sxs, sws))
    for a in args:  # eager first: tuners see the problem outside a capture
        scaled_mm(torch, *a)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for a in args:
            scaled_mm(torch, *a)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ys = [scaled_mm(torch, *a) for a in args]
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    graph.replay()
    stop.record()
    torch.cuda.synchronize()
    replays = max(3, min(200, int(target_ms / max(start.elapsed_time(stop), 1e-3))))
    samples = []
    for _ in range(3):
        start.record()
        for _ in range(replays):
            graph.replay()
        stop.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop) / (replays * rotations))
    del ys, graph, args, ws, xs
    torch.cuda.empty_cache()
    return statistics.median(samples)


def run(a):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from linear_suite import suite  # the same shapes, names and order as `bench --suite llm`
    torch.manual_seed(0)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for name, out, tokens, inp in suite():
        if a.only and a.only not in name:
            continue
        if out % 16 or inp % 16:
            print(f"{name},{out},{tokens},{inp},skipped", flush=True)
            continue
        ms = time_shape(torch, out, tokens, inp, a.mode == "rowwise", l2)
        rows.append(f"{name},{out},{tokens},{inp},{ms:.6f}")
        print(rows[-1], flush=True)
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("shape,m,n,k,ms\n" + "\n".join(rows) + "\n")
    if os.environ.get("PYTORCH_TUNABLEOP_ENABLED") == "1":
        print("PyTorch TunableOp's results (ScaledGemm lines):")
        res = torch.cuda.tunable.get_results()
        for r in res.items() if isinstance(res, dict) else res:
            if "ScaledGemm" in str(r):
                print(f"  {r}")


def summarize(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            lines = [l.split(",") for l in f.read().splitlines()[1:] if l]
        runs.append((os.path.basename(p), {l[0]: (l[1], l[2], l[3], float(l[4])) for l in lines}))
    base_name, base = runs[0]
    head = "| shape | m x n x k | " + " | ".join(f"{n} ms" for n, _ in runs)
    head += " | " + " | ".join(f"{n} / {base_name}" for n, _ in runs[1:]) + " |"
    print(head)
    print("|---|---|" + "---|" * (2 * len(runs) - 1))
    logs = {n: [] for n, _ in runs[1:]}
    for shape, (m, n, k, ms) in base.items():
        cells = [f"{r.get(shape, (0, 0, 0, float('nan')))[3]:.4f}" for _, r in runs]
        speed = []
        for name, r in runs[1:]:
            if shape in r and r[shape][3] > 0:
                speed.append(f"{ms / r[shape][3]:.2f}x")
                logs[name].append(math.log(ms / r[shape][3]))
            else:
                speed.append("-")
        print(f"| {shape} | {m}x{n}x{k} | " + " | ".join(cells) + " | " + " | ".join(speed) + " |")
    for name, l in logs.items():
        if l:
            print(f"geomean {name} vs {base_name}: {math.exp(sum(l) / len(l)):.3f}x over {len(l)} shapes; "
                  f"lowest {math.exp(min(l)):.3f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["rowwise", "tensorwise"], default="rowwise")
    ap.add_argument("--only", default="")
    ap.add_argument("--csv", default="")
    ap.add_argument("--summarize", nargs="+")
    a = ap.parse_args()
    if a.summarize:
        summarize(a.summarize)
    else:
        run(a)


if __name__ == "__main__":
    sys.exit(main())
