#!/usr/bin/env python3
"""TTFT(2048) broken down (GEMMs, attention, other kernels, the rest) per run of a
gpu-attention2.sh summary, against the issue-12 floor (GEMM + causal attention flops at a
given rate). Usage:

  plot_ttft.py SUMMARY -o out.png --runs gemma_ttft_again gemma_ttft_all ... \
      --floor gemma=10.80 --floor llama=35.40 [--title TEXT]

Each run's block is the one after its "== <name>" line: its tuned TTFT ("TTFT as benchmarked")
and its profile line "GEMMs (*): ... us, attention: ... us, other kernels: ... us"."""
import argparse
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_runs(path, names):
    text = open(path).read()
    blocks = {}
    for part in re.split(r"^== ", text, flags=re.M)[1:]:
        name, _, body = part.partition("\n")
        blocks.setdefault(name.strip(), body)
    runs = []
    for n in names:
        body = blocks.get(n)
        if body is None:
            sys.exit(f"plot_ttft: no block '== {n}' in {path}")
        ttft = re.search(r"TTFT as benchmarked: ([0-9.]+) us", body)
        parts = re.search(r"GEMMs \(\*\): ([0-9.]+) us.*attention: ([0-9.]+) us.*other kernels: ([0-9.]+) us", body)
        if not ttft or not parts:
            sys.exit(f"plot_ttft: block '{n}' has no TTFT or profile line")
        g, a, o = (float(x) / 1e3 for x in parts.groups())
        runs.append((n, float(ttft.group(1)) / 1e3, g, a, o))
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--runs", nargs="+", required=True)
    ap.add_argument("--floor", action="append", default=[], help="prefix=ms: the floor of runs named prefix*")
    ap.add_argument("--labels", nargs="+", help="x labels (default: the run names)")
    ap.add_argument("--title", default="TTFT(2048) and its kernels")
    args = ap.parse_args()
    floors = [(k, float(v)) for k, v in (f.split("=", 1) for f in args.floor)]
    runs = read_runs(args.summary, args.runs)
    fig, ax = plt.subplots(figsize=(1.4 * len(runs) + 3.5, 4.5))
    top = 0.0
    for i, (name, ttft, g, a, o) in enumerate(runs):
        rest = ttft - (g + a + o)
        bottom = 0.0
        for value, color, label in ((g, "#4c72b0", "GEMMs"), (a, "#dd8452", "attention"), (o, "#55a868", "other kernels"),
                                    (max(rest, 0.0), "#bbbbbb", "TTFT minus the kernel sum")):
            ax.bar(i, value, bottom=bottom, color=color, label=label if i == 0 else None)
            bottom += value
        floor = next((ms for k, ms in floors if name.startswith(k)), None)
        if floor:
            ax.plot([i - 0.4, i + 0.4], [floor, floor], "k--", lw=1, label="floor" if i == 0 else None)
            ax.plot([i - 0.4, i + 0.4], [1.25 * floor] * 2, "r:", lw=1, label="1.25 x floor" if i == 0 else None)
        top = max(top, ttft, bottom)
        ax.text(i, max(ttft, bottom) * 1.005, f"{ttft:.2f} ms" + (f"\n{ttft / floor:.3f}x" if floor else ""),
                ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels(args.labels or [r[0] for r in runs], rotation=15, ha="right", fontsize=8)
    # From 70% of the lowest floor: the differences are a few percent of the whole.
    low = min([ms for _, ms in floors] or [top]) * 0.7
    ax.set_ylim(low, top * 1.08)
    ax.set_ylabel("ms (axis from 70% of the floor)")
    ax.set_title(args.title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()
