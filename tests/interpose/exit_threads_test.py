#!/usr/bin/env python3
"""A program that exits while 8 threads are inside GEMM calls must exit 0 under the interposer,
every time, as it does natively (issue 33, finding 1; exit_threads_program.c).

  exit_threads_test.py --preload LIB --program BIN --mode exit|return --work DIR [--runs N]

1. plain: the program alone exits 0 (the reference BLAS has no exit-time teardown).
2. tune: with the preload library and tuning on, once (an exit may meet a tuning in progress).
3. The results file is rewritten so that every fp32 problem is served by oneDNN when it is here
   (its static destructors unmap the JIT-generated kernels that other threads are running: the
   crash of the finding), then N runs with tuning off, each of which must exit 0.
The preload library is set by hand (LD_PRELOAD, TUNABLEOP_ENABLED=1), as `tunableop run` does, so
that the sanitizer jobs need not build the CLI.
"""
import argparse
import os
import subprocess
import sys

from interpose_test_util import FAST, clean_env, fail

# 8 program threads on a 2-core machine: BLAS and OpenMP teams on top would spin for seconds.
ONE_THREAD = dict(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
BUDGETS = dict(FAST, TUNABLEOP_MAX_PROBLEM_DURATION_MS="300")


def run(name, cmd, env, expect_served):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        fail("%s run exited %d (signal %d if negative):\n%s" %
             (name, proc.returncode, -proc.returncode if proc.returncode < 0 else 0, proc.stderr[-4000:]))
    if expect_served and "served" not in proc.stderr:
        fail("%s run: no summary of served calls:\n%s" % (name, proc.stderr[-2000:]))
    return proc.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preload", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--mode", choices=["exit", "return"], required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--tiny", action="store_true",
                    help="shapes of one block, computed on the calling thread (TSan: OpenMP's uninstrumented "
                         "barriers between team threads would read as races)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    results = os.path.join(a.work, "results%d.csv")
    for f in os.listdir(a.work):
        os.remove(os.path.join(a.work, f))
    prog = [a.program, a.mode, "60"] + (["tiny"] if a.tiny else [])

    run("plain", prog, clean_env(**ONE_THREAD), False)
    env = clean_env(LD_PRELOAD=a.preload, TUNABLEOP_ENABLED="1", TUNABLEOP_FILENAME=results, **ONE_THREAD,
                    **BUDGETS)
    run("tune", prog, env, True)

    path = results.replace("%d", "0")
    with open(path) as f:
        lines = f.read().splitlines()
    entries = [l for l in lines if l and not l.startswith("Validator,")]
    if not entries:
        fail("the tune run wrote no results to %s" % path)
    onednn = any(l.startswith("Validator,ONEDNN_VERSION") for l in lines)
    if onednn:  # every fp32 problem served by oneDNN from now on
        lines = [",".join(l.split(",")[:2] + ["Gemm_Onednn_t1"] + l.split(",")[3:])
                 if l.startswith("GemmTunableOp_float_") else l for l in lines]
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
    env["TUNABLEOP_TUNING"] = "0"
    for i in range(a.runs):
        err = run("served %d" % i, prog, env, True)
        if i == 0 and onednn and "Gemm_Onednn_t1" in err and "not available" in err:
            fail("oneDNN's candidate was not used:\n" + err[-2000:])
    print("PASS: %s mode, plain + tune + %d served runs (%s) exited 0" %
          (a.mode, a.runs, "fp32 served by oneDNN" if onednn else "no oneDNN here"))


if __name__ == "__main__":
    main()
