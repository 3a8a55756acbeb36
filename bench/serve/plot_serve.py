#!/usr/bin/python3
"""Throughput and latency against offered load, from several `tunableop bench serve --json` files.

    /usr/bin/python3 bench/serve/plot_serve.py rate1.json rate4.json rate8.json inf.json -o serve.png

Left: output tokens/s (and completed requests/s on the right axis) against the offered rate.
Right: TTFT and TPOT, p50 and p99, against the offered rate. A run at rate `inf` (all requests at
once) is placed to the right of the finite rates and labelled "inf".
"""
import argparse
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            j = json.load(f)
        for key in ("rate", "output_tokens_per_s", "ttft_ms", "tpot_ms"):
            if key not in j:
                sys.exit(f"{p}: not a `tunableop bench serve --json` file (no {key})")
        rate = j["rate"]
        runs.append({"path": p, "inf": rate == "inf", "rate": math.inf if rate == "inf" else float(rate), **j})
    return runs


def positions(runs):
    finite = sorted(r["rate"] for r in runs if not r["inf"])
    inf_x = (finite[-1] * 1.5 if finite else 1.0)
    return [inf_x if r["inf"] else r["rate"] for r in runs], inf_x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="bench serve --json outputs")
    ap.add_argument("-o", "--output", default="serve.png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    runs = load(a.json)
    xs, inf_x = positions(runs)
    order = sorted(range(len(runs)), key=lambda i: xs[i])
    runs = [runs[i] for i in order]
    xs = [xs[i] for i in order]

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.plot(xs, [r["output_tokens_per_s"] for r in runs], "o-", label="output tokens/s")
    left.set_xlabel("offered load (requests/s)")
    left.set_ylabel("output tokens/s")
    left.grid(True, alpha=0.3)
    req = left.twinx()
    req.plot(xs, [r["requests_per_s"] for r in runs], "s--", color="tab:gray", label="requests/s")
    req.set_ylabel("completed requests/s")
    lines = left.get_lines() + req.get_lines()
    left.legend(lines, [line.get_label() for line in lines], loc="upper left")
    for ax in (left, right):
        ticks = sorted(set(xs))
        ax.set_xticks(ticks)
        ax.set_xticklabels(["inf" if x == inf_x and any(r["inf"] for r in runs) else f"{x:g}" for x in ticks])
    for metric, style in (("ttft_ms", "o"), ("tpot_ms", "s")):
        for q, line in (("p50", "-"), ("p99", "--")):
            right.plot(xs, [r[metric][q] for r in runs], style + line, label=f"{metric[:4].upper()} {q}")
    right.set_xlabel("offered load (requests/s)")
    right.set_ylabel("ms")
    right.set_yscale("log")
    right.grid(True, alpha=0.3)
    right.legend()
    model = runs[0].get("model", "")
    fig.suptitle(a.title or f"tunableop serve: {model}, {runs[0].get('requests', '?')} requests per point")
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
