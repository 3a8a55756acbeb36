#!/usr/bin/env python3
"""The single interposer cases of issue 33 (cases_program.c), each run plain and under the preload
library with tuning on (LD_PRELOAD + TUNABLEOP_ENABLED=1, as `tunableop run --tune` does):

  cases_test.py --preload LIB --program BIN --work DIR

invalid-order  the same output as plain (C untouched) and the call counted as invalid arguments
nan-first      exits 0; the shape whose first call had NaN/Inf inputs is tuned (results file) or
               recorded for offline tuning (untuned file), never left "tuning failed"
chdir          both problems in the results file named before the chdir, none in the new folder
too-large      a GEMM whose tuning copies do not fit the address space left (RLIMIT_AS): correct, passed
               to the program's library, recorded in the untuned file, said once at -v 1
"""
import argparse
import os
import shutil
import subprocess
import sys

from interpose_test_util import FAST, clean_env, entry_lines, fail

BUDGETS = dict(FAST, TUNABLEOP_MAX_PROBLEM_DURATION_MS="500")


def run(cmd, env, cwd, want_rc=0):
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    if want_rc is not None and p.returncode != want_rc:
        fail("%s exited %d:\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr[-3000:]))
    return p.stdout, p.stderr, p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preload", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(os.path.join(a.work, "elsewhere"))
    served = clean_env(LD_PRELOAD=a.preload, TUNABLEOP_ENABLED="1", TUNABLEOP_FILENAME="results%d.csv",
                       TUNABLEOP_UNTUNED_FILENAME="untuned%d.csv", **BUDGETS)

    # Finding 12: an invalid CBLAS order is the library's to reject: the reference CBLAS says so
    # and exits (255), others return with C untouched. The interposed run must do the same.
    plain, _, plain_rc = run([a.program, "invalid-order"], clean_env(), a.work, want_rc=None)
    got, err, rc = run([a.program, "invalid-order"], served, a.work, want_rc=None)
    if (got, rc) != (plain, plain_rc) or (rc == 0 and "c_untouched=1" not in got):
        fail("invalid-order: plain printed %r (exit %d), interposed %r (exit %d)" % (plain, plain_rc, got, rc))
    if "invalid arguments: 1" not in err:
        fail("invalid-order: the call was not passed through as invalid arguments:\n" + err[-2000:])
    print("invalid-order: the library's own answer (exit %d), passed through" % rc)

    # Finding 16: NaN/Inf in the first call of a shape.
    run([a.program, "nan-first"], clean_env(), a.work)
    out, err, _ = run([a.program, "nan-first"], served, a.work)
    tuned = [l for l in entry_lines(os.path.join(a.work, "results0.csv")) if ",nn_40_24_56," in l]
    recorded = [l for l in entry_lines(os.path.join(a.work, "untuned0.csv")) if "nn_40_24_56" in l]
    if not tuned and not recorded:
        fail("nan-first: the shape was neither tuned nor recorded for offline tuning:\n" + err[-3000:])
    if "tuning failed" in err:
        fail("nan-first: calls counted as 'tuning failed':\n" + err[-2000:])
    print("nan-first: %s" % ("tuned" if tuned else "recorded for offline tuning"))

    # Finding 16: chdir after the first GEMM.
    for f in ("results0.csv", "results0.csv.stats"):
        if os.path.exists(os.path.join(a.work, f)):
            os.remove(os.path.join(a.work, f))
    run([a.program, "chdir", "elsewhere"], served, a.work)
    here = entry_lines(os.path.join(a.work, "results0.csv"))
    there = os.listdir(os.path.join(a.work, "elsewhere"))
    if len(here) != 2 or there:
        fail("chdir: %d results where the run started (expected 2), files after the chdir: %s" % (len(here), there))
    print("chdir: both results in the first folder")

    # Findings 2 and 3: tuning that does not fit what is free is skipped, once. One OpenMP and
    # BLAS thread: a new thread's stack would not fit the limit either.
    one = dict(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out, _, _ = run([a.program, "too-large"], dict(clean_env(), **one), a.work)
    if "too_large=skipped" in out:
        print("too-large: skipped (sanitizer build: address-space limits mean nothing there)")
        print("PASS")
        return
    out, err, _ = run([a.program, "too-large"], dict(served, **one), a.work)
    key = "GemmTunableOp_float_NN,nn_8192_2_8192"
    if err.count("cannot tune GemmTunableOp_float_NN(nn_8192_2_8192) here") != 1:
        fail("too-large: expected the 'cannot tune' note once at -v 1:\n" + err[-3000:])
    if "too large to tune in the memory free (recorded for offline tuning): 2" not in err:
        fail("too-large: both calls should go to the library as too large to tune:\n" + err[-3000:])
    if not any(key in l for l in entry_lines(os.path.join(a.work, "untuned0.csv"))):
        fail("too-large: the problem is not in the untuned file")
    if any(key in l for l in entry_lines(os.path.join(a.work, "results0.csv"))):
        fail("too-large: the problem was tuned")
    print("too-large: served by the program's library, recorded, said once")
    print("PASS")


if __name__ == "__main__":
    main()
