#!/usr/bin/env python3
"""Joins the attention lab's CSV and sdpa_bench.py's CSV into one markdown table.

    compare.py LAB_CSV SDPA_CSV
"""
import csv
import sys
from collections import defaultdict


def main():
    lab = defaultdict(list)
    for r in csv.DictReader(open(sys.argv[1])):
        lab[r["shape"]].append(r)
    torch_rows = defaultdict(dict)
    for r in csv.DictReader(open(sys.argv[2])):
        torch_rows[r["shape"]][r["backend"]] = float(r["ms"])
    print("| shape | ours: best (ms) | TFLOP/s | % copy bw | best Attn_Flash (ms) | Attn_Cudnn_Sdpa (ms) |"
          " torch default (ms) | torch flash | torch cudnn | torch efficient | torch default / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, rows in lab.items():
        ok = [r for r in rows if float(r["rel_diff"]) <= 2e-2]
        if not ok:
            continue
        best = min(ok, key=lambda r: float(r["ms"]))
        flash = [r for r in ok if not r["candidate"].startswith("Attn_Cudnn")]
        fbest = min(flash, key=lambda r: float(r["ms"])) if flash else None
        cud = [r for r in ok if r["candidate"].startswith("Attn_Cudnn")]
        t = torch_rows.get(shape.split(".paged")[0], {})  # PyTorch has no paged cache: its contiguous time
        default = next(((k, v) for k, v in t.items() if k.startswith("default")), None)
        fmt = lambda v: f"{v:.4f}" if v is not None else "-"  # noqa: E731
        ratio = f"{default[1] / float(best['ms']):.2f}x" if default else "-"
        print(f"| {shape} | {best['candidate']} ({float(best['ms']):.4f}) | {float(best['tflops']):.1f} |"
              f" {float(best['pct_copy_bw']):.1f} | {fmt(float(fbest['ms'])) if fbest else '-'} |"
              f" {fmt(float(cud[0]['ms'])) if cud else '-'} |"
              f" {(default[0].split(':')[1] + ' ' + fmt(default[1])) if default else '-'} |"
              f" {fmt(t.get('flash'))} | {fmt(t.get('cudnn'))} | {fmt(t.get('efficient'))} | {ratio} |")


if __name__ == "__main__":
    main()
