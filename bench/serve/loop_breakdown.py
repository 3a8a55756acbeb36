#!/usr/bin/env python3
"""Where `tunableop serve`'s loop spent a run: two /metrics snapshots (before, after) in, one line out.

    loop_breakdown.py metrics_before.txt metrics_after.txt [--wall SECONDS]

Reads the step histograms' sums and counts (docs/serve.md, "Metrics") and prints the decode and
prefill engine calls (count, mean ms, total s), the host turns between busy calls (count, mean ms,
total s), their share of the busy time, and the rows the decode steps ran against the sequences
they decoded (what padding to the decode buckets costs the GEMMs). With --wall, the run's wall
time too, and the share of it the loop was busy.
"""
import argparse
import re
import sys


def read(path):
    values = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^(tunableop_[a-z_]+) ([-0-9.eE+]+|\+Inf|NaN)$", line.strip())  # unlabelled samples
        if m:
            values[m.group(1)] = float(m.group(2))
    return values


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--wall", type=float, default=0.0)
    a = ap.parse_args()
    b, e = read(a.before), read(a.after)

    def delta(name):
        return e.get(name, 0.0) - b.get(name, 0.0)

    parts = []
    busy = 0.0
    for what, name in (("decode", "tunableop_decode_step_seconds"), ("prefill", "tunableop_prefill_step_seconds"),
                       ("host turn", "tunableop_host_turn_seconds")):
        n, s = delta(name + "_count"), delta(name + "_sum")
        if name + "_count" not in e:
            print(f"loop_breakdown: {a.after} has no {name} (a server before this metric)", file=sys.stderr)
            return 1
        busy += s
        parts.append((what, n, s))
    out = []
    for what, n, s in parts:
        mean = 1e3 * s / n if n else 0.0
        share = 100 * s / busy if busy else 0.0
        out.append(f"{what} {n:.0f} x {mean:.2f} ms = {s:.2f} s ({share:.1f}%)")
    rows, padded = delta("tunableop_decode_rows_total"), delta("tunableop_decode_padded_rows_total")
    if rows:
        out.append(f"decode rows {rows:.0f}, run at {padded:.0f} ({padded / rows:.3f}x)")
    if a.wall > 0:
        out.append(f"busy {busy:.2f} s of {a.wall:.2f} s wall ({100 * busy / a.wall:.1f}%)")
    print("; ".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
