#!/usr/bin/env python3
"""Seed Example 1, unmodified for the interposer: 10,000 fp32 products of (512 x 2048) @ (2048 x
1024) on the GPU (cuBLAS sees nn_1024_512_2048 after PyTorch's M/N swap), timed with CUDA events.
  python3 matmul_example1.py [--iters N]      prints "<iter/s> iter/s (<seconds>s)"
"""
import argparse

import torch


def time_matmul(m, n, k, iters, warmup=10):
    t0 = torch.cuda.Event(enable_timing=True)
    t1 = torch.cuda.Event(enable_timing=True)
    a = torch.rand(m, k, device="cuda")
    b = torch.rand(k, n, device="cuda")
    for i in range(iters + warmup):
        if i == warmup:
            t0.record()
        c = a @ b
    t1.record()
    torch.cuda.synchronize()
    dt = t0.elapsed_time(t1) / 1000
    print(f"{iters / dt:0.2f} iter/s ({dt:0.4g}s)")
    return c


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10000)
    time_matmul(512, 1024, 2048, ap.parse_args().iters)
