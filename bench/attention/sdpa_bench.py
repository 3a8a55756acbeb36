#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the attention lab's shapes, timed the same way.

    sdpa_bench.py SHAPES_CSV OUT_CSV      (SHAPES_CSV from `attention_lab --list`)

Per shape: the backend PyTorch's priority list picks ("default", named after the choice it
reports), then each backend forced through sdpa_kernel (flash, efficient, cudnn, math) where it
accepts the inputs. Q is a [b, h, s, d] view of our [b][s][h][d] rows and K/V are the
[b][kv_head][s][d] cache, so every call reads the same bytes our kernels read. PyTorch has no
paged cache: paged shapes are skipped. Decode (one query) runs with is_causal=False, which is
the same function (PyTorch aligns its causal mask top-left). Inputs rotate through copies
larger than the L2; median over event-timed batches.
"""
import csv
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
            ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)]
CHOICE_NAMES = {int(b): n for n, b in BACKENDS}


def flops(b, q, k, h, d, causal):
    visible = q * k - (q * (q - 1) / 2 if causal else 0)
    return 4.0 * b * h * d * visible


def time_calls(fn, sets, samples=7):
    for i in range(3):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(3):
        fn(*sets[i % len(sets)])
    stop.record()
    stop.synchronize()
    reps = max(1, min(2000, int(5.0 / max(start.elapsed_time(stop) / 3, 1e-3))))
    per_call = []
    for s in range(samples):
        start.record()
        for i in range(reps):
            fn(*sets[(s * reps + i) % len(sets)])
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) / reps)
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
        try:
            choice = torch._fused_sdp_choice(*sets[0], None, 0.0, causal, None, gqa)
            picked = CHOICE_NAMES.get(int(choice), str(choice))
        except Exception as e:  # noqa: BLE001 - report whatever the private API says
            picked = f"?({type(e).__name__})"
        rows = [(f"default:{picked}", call, True)]
        for name, backend in BACKENDS:
            if name == "math" and b * h * q * k > 2**31:
                continue

            def forced(qq, kk, vv, backend=backend):
                with sdpa_kernel([backend]):
                    return call(qq, kk, vv)

            rows.append((name, forced, False))
        for name, fn, _ in rows:
            try:
                ms = time_calls(fn, sets)
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
