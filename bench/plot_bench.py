#!/usr/bin/env python3
"""Plots a `tunableop bench --suite ... --csv FILE` table: speedup of the tuned choice over
Default per shape, and how close each lands to its roofline floor.

    python3 bench/plot_bench.py docs/results/gpu/h200-llm.csv -o docs/results/gpu/h200-llm.png
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(a.csv)) if float(r["tuned_ms"] or 0) > 0]
    names = [r["shape"] for r in rows]
    speed = [float(r["default_ms"]) / float(r["tuned_ms"]) for r in rows]
    floor = [100 * float(r["floor_ms"]) / float(r["tuned_ms"]) if float(r["floor_ms"] or 0) > 0 else 0 for r in rows]
    floor_def = [100 * float(r["floor_ms"]) / float(r["default_ms"]) if float(r["floor_ms"] or 0) > 0 else 0 for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 0.32 * len(rows)), 8), sharex=True)
    x = range(len(rows))
    ax1.bar(x, speed, color=["tab:green" if s >= 1.02 else "tab:gray" for s in speed])
    ax1.axhline(1.0, color="black", linewidth=0.8)
    ax1.set_yscale("log")
    ax1.set_ylabel("speedup over Default (log)")
    ax1.set_title(a.title or a.csv)
    ax2.bar([i - 0.2 for i in x], floor_def, width=0.4, label="Default", color="tab:gray")
    ax2.bar([i + 0.2 for i in x], floor, width=0.4, label="tuned", color="tab:blue")
    ax2.axhline(100, color="black", linewidth=0.8)
    ax2.set_ylabel("% of roofline floor")
    ax2.legend()
    ax2.set_xticks(list(x))
    ax2.set_xticklabels(names, rotation=75, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
