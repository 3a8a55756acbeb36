#!/usr/bin/env python3
"""Plots `tunableop bench --suite attention --csv SUITE` next to PyTorch's SDPA on the same shapes
(`sdpa_bench.py` CSV): per shape, Default (the math path), the tuned choice and PyTorch's
default backend in ms (log scale), and the tuned choice's TFLOP/s (prefill) or share of the
KV-bytes floor (decode).

    python3 bench/attention/plot_suite.py suite.csv sdpa.csv -o attention_suite.png --title "H100"
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite")
    ap.add_argument("sdpa", nargs="?", default="")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(a.suite)) if float(r["tuned_ms"] or 0) > 0]
    torch = {}
    if a.sdpa:
        for r in csv.DictReader(open(a.sdpa)):
            if r["backend"].startswith("default"):
                torch[r["shape"]] = float(r["ms"])
    names = [r["shape"] for r in rows]
    x = list(range(len(rows)))
    w = 0.27
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(9, 0.55 * len(rows)), 8), sharex=True)
    ax1.bar([i - w for i in x], [float(r["default_ms"] or 0) for r in rows], w, label="Default (math path)",
            color="tab:gray")
    ax1.bar(x, [float(r["tuned_ms"]) for r in rows], w, label="tuned (chosen candidate)", color="tab:green")
    ax1.bar([i + w for i in x], [torch.get(n, 0) for n in names], w, label="PyTorch SDPA (its default)",
            color="tab:blue")
    ax1.set_yscale("log")
    ax1.set_ylabel("ms per call")
    ax1.legend(fontsize=8)
    ax1.set_title(a.title or "Attention op: Default vs tuned vs PyTorch")
    decode = [int(r["params"].split("_q")[1].split("_")[0]) <= 16 for r in rows]
    vals = [float(r["pct_kv_floor"]) if d else float(r["tflops"]) for r, d in zip(rows, decode)]
    ax2.bar(x, vals, color=["tab:orange" if d else "tab:purple" for d in decode])
    for i, (v, d) in enumerate(zip(vals, decode)):
        ax2.text(i, v, f"{v:.0f}{'%' if d else ''}", ha="center", va="bottom", fontsize=7)
    ax2.set_ylabel("prefill: TFLOP/s (purple)\ndecode: % of KV-bytes floor (orange)")
    ax2.set_xticks(x)
    ax2.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
