#!/usr/bin/python3
"""The "unmodified program" demo on the CPU (./run.sh): NumPy as Debian packages it (linked to
libblas.so.3) doing the seed's Example 1 shape in fp32 and a small MLP, timed. Run it plain and
under `tunableop run --tune`; nothing in it knows about tunableop.
  numpy_demo.py [--iters N]
"""
import argparse
import time

import numpy as np


def timed(name, fn, iters):
    fn()  # first call (tuned here under `tunableop run --tune`)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t) / iters)
    print(f"{name:<44} {1 / best:9.1f} iter/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    iters = ap.parse_args().iters
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 2048), dtype=np.float32)
    b = rng.standard_normal((2048, 1024), dtype=np.float32)
    timed("Example 1: (512 x 2048) @ (2048 x 1024) fp32", lambda: a @ b, iters)
    x = rng.standard_normal((32, 512), dtype=np.float32)
    w1 = rng.standard_normal((512, 2048), dtype=np.float32) / 23
    w2 = rng.standard_normal((2048, 512), dtype=np.float32) / 45
    timed("MLP: relu(x[32, 512] @ W1) @ W2, fp32", lambda: np.maximum(x @ w1, 0) @ w2, iters * 5)


if __name__ == "__main__":
    main()
