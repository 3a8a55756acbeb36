#!/usr/bin/env python3
"""Runs one unmodified program several ways and checks what the interposer did.

  run_interposed.py --tunableop BIN --preload LIB --work DIR [--label gpu] -- PROGRAM ARGS...

PROGRAM ARGS... is run with one extra argument, the file to write its outputs to (blocks of
uint64 count, float64 tolerance, count float64 values) and must print "servable_problems=N" and
"engine_loaded=0|1" (and may print "expect pass: <reason>: <count>" for calls that must pass
through), exit 0 when its own checks pass and 77 to skip (e.g. no GPU). Runs:
  plain     no interposer: the reference outputs
  tune      `tunableop run --tune`: outputs equal plain's within each block's tolerance, the results
            file has one line per servable problem, the summary counts every call
  no-tune   `tunableop run --no-tune` on those results: same outputs, no tuning, same lines
  record    `tunableop run --record` into an empty file: every problem in the untuned file
  disabled  LD_PRELOAD set, TUNABLEOP_ENABLED=0: outputs bit-identical to plain's (within tolerance with
            --approximate-disabled), the engine never loaded
"""
import argparse
import os
import re
import struct
import subprocess
import sys

from interpose_test_util import FAST, clean_env, entry_lines, fail

SKIP = 77
SUMMARY = re.compile(r"tunableop: interpose: (\w+): calls (\d+), served (\d+), library default (\d+), "
                     r"passed through (\d+)(?: \((.*)\))?$")


def run(name, cmd, env, work):
    out_file = os.path.join(work, name + ".out")
    proc = subprocess.run(cmd + [out_file], env=env, capture_output=True, text=True, timeout=1200)
    with open(os.path.join(work, name + ".log"), "w") as log:
        log.write("$ " + " ".join(cmd + [out_file]) + "\n" + proc.stdout + proc.stderr)
    if proc.returncode == SKIP:
        print("SKIP (%s): %s" % (name, (proc.stdout + proc.stderr).strip()[-300:]))
        sys.exit(SKIP)
    if proc.returncode != 0:
        fail("%s run exited %d:\n%s%s" % (name, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    info = dict(re.findall(r"(\w+)=(\S+)", proc.stdout))
    # "expect pass: <reason text>: <count>" lines: calls the program knows must pass through.
    info["expect_pass"] = {m.group(1): int(m.group(2)) for m in re.finditer(r"expect pass: (.+): (\d+)", proc.stdout)}
    summary = {}
    for line in proc.stderr.splitlines():
        m = SUMMARY.match(line.strip())
        if m:
            reasons = {}
            for part in (m.group(6) or "").split("; "):
                if ": " in part:
                    k, v = part.rsplit(": ", 1)
                    reasons[k] = int(v)
            summary[m.group(1)] = dict(calls=int(m.group(2)), served=int(m.group(3)), default=int(m.group(4)),
                                       passed=int(m.group(5)), reasons=reasons)
    return read_blocks(out_file), info, summary, proc.stderr


def read_blocks(path):
    blocks = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        count, tol = struct.unpack_from("<Qd", data, pos)
        pos += 16
        blocks.append((tol, struct.unpack_from("<%dd" % count, data, pos)))
        pos += 8 * count
    return blocks


def compare(name, got, want, exact=False):
    if len(got) != len(want):
        fail("%s: %d output blocks, plain run had %d" % (name, len(got), len(want)))
    for i, ((tol, g), (_, w)) in enumerate(zip(got, want)):
        if exact:
            if g != w:
                fail("%s: block %d differs from the plain run (must be bit-identical)" % (name, i))
            continue
        scale = max([abs(x) for x in w] + [1e-30])
        err = max([abs(a - b) for a, b in zip(g, w)] + [0.0])
        if not err / scale <= 2 * tol:  # both runs carry rounding error
            fail("%s: block %d differs from the plain run: relative %.3g > %.3g" % (name, i, err / scale, 2 * tol))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tunableop", required=True)
    ap.add_argument("--preload", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--approximate-disabled", action="store_true",
                    help="compare the disabled run within tolerance (GPU libraries need not be bit-reproducible)")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = [p for p in a.program if p != "--"]
    os.makedirs(a.work, exist_ok=True)
    for f in os.listdir(a.work):
        os.remove(os.path.join(a.work, f))
    results = os.path.join(a.work, "results.csv")  # device 0 -> results0.csv
    tool = [a.tunableop, "run"]

    plain, info, _, _ = run("plain", prog, clean_env(), a.work)
    if info.get("engine_loaded") != "0":
        fail("plain run: the engine was loaded without the interposer?")
    problems = int(info["servable_problems"])

    env = dict(clean_env(), **FAST)
    tuned, info, summary, err = run("tune", tool + ["--tune", "--results", results, "--"] + prog, env, a.work)
    if info.get("engine_loaded") != "1":
        fail("tune run: the engine was never loaded")
    compare("tune", tuned, plain)
    lines = entry_lines(os.path.join(a.work, "results0.csv"))
    if len(lines) != problems:
        fail("tune run: %d lines in the results file, expected one per problem (%d):\n%s" %
             (len(lines), problems, "\n".join(lines)))
    if len(set(l.split(",")[0] + l.split(",")[1] for l in lines)) != len(lines):
        fail("tune run: a problem appears twice in the results file")
    if not summary:
        fail("tune run: no summary at exit (TUNABLEOP_VERBOSE=1):\n" + err[-2000:])
    for api, s in summary.items():
        if s["calls"] != s["served"] + s["default"] + s["passed"]:
            fail("tune run: %s counts do not add up: %s" % (api, s))
        if s["reasons"].get("tuning failed") or s["reasons"].get("engine unavailable"):
            fail("tune run: %s: %s" % (api, s["reasons"]))
    for reason, count in info["expect_pass"].items():
        got = sum(s["reasons"].get(reason, 0) for s in summary.values())
        if got != count:
            fail("tune run: %d calls passed through for '%s', expected %d: %s" % (got, reason, count, summary))
    decided = sum(s["served"] + s["default"] for s in summary.values())
    if decided < problems:
        fail("tune run: only %d calls were decided by tunableop, expected >= %d: %s" % (decided, problems, summary))
    print("tune: %d problems, summary %s" % (problems, summary))

    no_tune, _, summary2, err2 = run("no-tune", tool + ["--no-tune", "--results", results, "--"] + prog, env, a.work)
    compare("no-tune", no_tune, plain)
    if "finding fastest" in err2:
        fail("no-tune run tuned something")
    if entry_lines(os.path.join(a.work, "results0.csv")) != lines:
        fail("no-tune run changed the results file")
    for api, s in summary2.items():
        if s["reasons"].get("no result, tuning off"):
            fail("no-tune run: %s had problems without a result: %s" % (api, s))

    untuned = os.path.join(a.work, "untuned.csv")
    rec_env = dict(env, TUNABLEOP_UNTUNED_FILENAME=untuned)
    recorded, _, summary3, _ = run("record", tool + ["--record", "--results", os.path.join(a.work, "empty.csv"), "--"]
                                   + prog, rec_env, a.work)
    compare("record", recorded, plain)
    rec_lines = entry_lines(os.path.join(a.work, "untuned0.csv"))
    if len(rec_lines) != problems:
        fail("record run: %d untuned lines, expected %d" % (len(rec_lines), problems))
    if entry_lines(os.path.join(a.work, "empty0.csv")):
        fail("record run wrote results")
    if any(s["served"] for s in summary3.values()):
        fail("record run served calls without results: %s" % summary3)

    off_env = dict(clean_env(), LD_PRELOAD=a.preload, TUNABLEOP_ENABLED="0", TUNABLEOP_VERBOSE="1")
    off, info, _, err4 = run("disabled", prog, off_env, a.work)
    compare("disabled", off, plain, exact=not a.approximate_disabled)
    if info.get("engine_loaded") != "0":
        fail("disabled run loaded the engine")
    if "interpose: off" not in err4:
        fail("disabled run: no 'off' line from the preload library:\n" + err4[-1000:])
    print("PASS: plain, tune, no-tune, record, disabled")


if __name__ == "__main__":
    main()
