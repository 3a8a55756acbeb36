#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the attention lab's shapes, timed the same way.

    sdpa_bench.py SHAPES_CSV OUT_CSV      (SHAPES_CSV from `attention_lab --list`)

Per shape: the backend PyTorch's priority list picks ("default", named after the choice it
reports), then each backend forced through sdpa_kernel (flash, efficient, cudnn, math) where it
accepts the inputs. Q is a [b, h, s, d] view of our [b][s][h][d] rows and K/V are the
[b][kv_head][s][d] cache, so every call reads the same bytes our kernels read. PyTorch has no
paged cache: paged shapes are skipped. Decode (one query) runs with is_causal=False, which is
the same function (PyTorch aligns its causal mask top-left). Inputs rotate through copies
larger than the L2; calls are replayed from a CUDA graph (no Python overhead in the time);
median over event-timed batches. SDPA_BENCH_REGIME=suite times as the suite's graph column does
(see REGIME below); SDPA_BENCH_BACKENDS limits the forced backends.
"""
import csv
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
            ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)]
CHOICE_NAMES = {getattr(b, "value", b): n for n, b in BACKENDS}


def flops(b, q, k, h, d, causal):
    visible = q * k - (q * (q - 1) / 2 if causal else 0)
    return 4.0 * b * h * d * visible


# SDPA_BENCH_REGIME=suite times each call as `tunableop bench --suite attention` times its graph
# column (replay_ms_per_call in tools/bench_attention.cc): a graph of at least 32 calls over the
# input copies, 10 replays back to back per sample, median of 5 samples. The default ("burst")
# captures about 5 ms of calls and replays the graph once per sample: at a 0.9 ms prefill that is
# 5 calls, against the suite's 32 x 10 back to back, a different power and clock regime.
REGIME = os.environ.get("SDPA_BENCH_REGIME", "burst")
# SDPA_BENCH_BACKENDS=cudnn,flash: only these forced backends after the default (all when unset).
ONLY = [x for x in os.environ.get("SDPA_BENCH_BACKENDS", "").split(",") if x]


def time_calls(fn, sets, samples=7):
    """Median ms per call. The calls are captured into a CUDA graph and replayed, so Python's
    dispatch cost (tens of microseconds) stays out of short calls, as it does for the C++ lab's
    back-to-back launches; eager timing when capture fails."""
    if REGIME == "suite":
        return time_calls_as_suite(fn, sets)
    for i in range(3):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(3):
        fn(*sets[i % len(sets)])
    stop.record()
    stop.synchronize()
    reps = max(1, min(200, int(5.0 / max(start.elapsed_time(stop) / 3, 1e-3))))
    graph = None
    try:
        graph = capture(fn, sets, reps)
    except Exception as e:  # noqa: BLE001 - fall back to eager timing
        print(f"    (graph capture failed: {type(e).__name__}; eager timing)", file=sys.stderr)
        graph = None
        torch.cuda.synchronize()
    per_call = []
    for s in range(samples):
        start.record()
        if graph is not None:
            graph.replay()
        else:
            for i in range(reps):
                fn(*sets[(s * reps + i) % len(sets)])
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) / reps)
    return statistics.median(per_call)


def capture(fn, sets, calls):
    """A CUDA graph of `calls` calls cycling through the input sets, replayed once (warm)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(*sets[i % len(sets)])
    graph.replay()
    torch.cuda.synchronize()
    return graph


def time_calls_as_suite(fn, sets):
    """Median ms per call as the suite's graph column times it (no eager fallback)."""
    calls = len(sets) * -(-32 // len(sets))
    for i in range(len(sets)):
        fn(*sets[i])
    torch.cuda.synchronize()
    graph = capture(fn, sets, calls)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call = []
    for _ in range(5):
        start.record()
        for _ in range(10):
            graph.replay()
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) / (10 * calls))
    return statistics.median(per_call)


def main():
    shapes = list(csv.DictReader(open(sys.argv[1])))
    out = csv.writer(open(sys.argv[2], "w"))
    out.writerow(["shape", "backend", "ms", "tflops", "kv_gbps"])
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}",
          file=sys.stderr)
    for s in shapes:
        if int(s["page_size"]) > 0:
            continue
        b, q, k, h, kv, d = (int(s[x]) for x in ("batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim"))
        causal = bool(int(s["causal"])) and q > 1
        gqa = h != kv
        set_bytes = 2 * (b * q * h * d + 2 * b * kv * k * d)
        copies = max(1, min(8, -(-4 * l2 // set_bytes)))
        sets = []
        for _ in range(copies):
            qq = torch.randn(b, q, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            kk = torch.randn(b, kv, k, d, device="cuda", dtype=torch.bfloat16)
            vv = torch.randn(b, kv, k, d, device="cuda", dtype=torch.bfloat16)
            sets.append((qq, kk, vv))

        def call(qq, kk, vv):
            return F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal, enable_gqa=gqa)

        fl = flops(b, q, k, h, d, bool(int(s["causal"])))
        kv_bytes = 2.0 * b * kv * k * d * 2
        try:  # a private API: what the priority list picks for these inputs
            choice = torch._fused_sdp_choice(*sets[0], attn_mask=None, dropout_p=0.0, is_causal=causal, scale=None,
                                             enable_gqa=gqa)
            picked = CHOICE_NAMES.get(getattr(choice, "value", choice), str(choice))
        except Exception as e:  # noqa: BLE001 - report whatever the private API says
            print(f"  _fused_sdp_choice: {type(e).__name__}: {str(e).splitlines()[0][:160]}", file=sys.stderr)
            picked = "?"
        rows = [(f"default:{picked}", None)]
        for name, backend in BACKENDS:
            if name == "math" and b * h * q * k > 2**31:
                continue
            if ONLY and name not in ONLY:
                continue
            rows.append((name, backend))
        for name, backend in rows:
            try:
                if backend is None:
                    ms = time_calls(call, sets)
                else:  # the context is entered once, outside the timed loop (it costs ~30 us)
                    with sdpa_kernel([backend]):
                        ms = time_calls(call, sets)
            except Exception as e:  # noqa: BLE001 - a backend that refuses the shape
                print(f"  {s['name']} {name}: refused ({type(e).__name__}: {str(e).splitlines()[0][:120]})",
                      file=sys.stderr)
                continue
            tf = fl / (ms * 1e-3) / 1e12
            gbps = kv_bytes / (ms * 1e-3) / 1e9
            print(f"  {s['name']:32s} {name:18s} {ms:9.4f} ms {tf:7.1f} TFLOP/s {gbps:7.0f} GB/s", file=sys.stderr)
            out.writerow([s["name"], name, f"{ms:.6f}", f"{tf:.2f}", f"{gbps:.1f}"])
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
