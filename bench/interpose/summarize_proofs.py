#!/usr/bin/env python3
"""Reads the logs scripts/gpu-interpose.sh wrote and prints the results as markdown tables:
the CUDA test, host cost per call, seed Example 1, the F.linear suite and seed Example 2.
  summarize_proofs.py LOGDIR [--suite-csv OUT.csv]
"""
import argparse
import math
import statistics
import os
import re

TOTAL = re.compile(r"tunableop: interpose: total: calls (\d+), served (\d+) \(([\d.]+)%\), library default (\d+) "
                   r"\(([\d.]+)%\), passed through (\d+) \(([\d.]+)%\)")
API = re.compile(r"tunableop: interpose: (\w+): calls (\d+), served (\d+), library default (\d+), passed through (\d+)"
                 r"(?: \((.*)\))?")


# scripts/gpu-interpose.sh's cost step: the A/B benchmarks under --tune, --no-tune and disabled.
AB_LOGS = ("ab_gpu_tune", "ab_gpu_passthrough", "ab_gpu_disabled", "ab_cpu_tune", "ab_cpu_passthrough",
           "ab_cpu_disabled")


def read(logdir, name):
    path = os.path.join(logdir, name)
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        return f.read()


def interpose_fraction(text):
    """served / library default / passed through, from the process with the most calls."""
    if not text:
        return "-"
    best = None
    for m in TOTAL.finditer(text):
        if best is None or int(m.group(1)) > int(best.group(1)):
            best = m
    if best is None:
        return "no summary"
    reasons = {}
    for m in API.finditer(text):
        for part in (m.group(6) or "").split("; "):
            if ": " in part:
                k, v = part.rsplit(": ", 1)
                reasons[k] = reasons.get(k, 0) + int(v)
    why = ", ".join("%s %d" % kv for kv in sorted(reasons.items(), key=lambda kv: -kv[1])[:3])
    return "%s calls: %s%% served, %s%% library default (tuned), %s%% passed%s" % (
        best.group(1), best.group(3), best.group(5), best.group(7), " (" + why + ")" if why else "")


def number(text, pattern):
    if not text:
        return None
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def fmt(x, digits=1):
    return "-" if x is None else ("%.*f" % (digits, x))


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else "%.3fx" % (a / b)


def suite_rows(logdir):
    """Per variant and shape: (m, n, k, ms), ms the median over the rounds run (suite_plain.txt,
    suite_plain2.txt, ...)."""
    tables = {}
    for variant in ("plain", "pytorch", "ours"):
        samples = {}
        for suffix in ("", "2", "3"):
            text = read(logdir, "suite_%s%s.txt" % (variant, suffix)) or ""
            for line in text.splitlines():
                parts = line.strip().split(",")
                if len(parts) == 5 and "@" in parts[0]:
                    try:
                        mnk = (int(parts[1]), int(parts[2]), int(parts[3]))
                        samples.setdefault(parts[0], (mnk, []))[1].append(float(parts[4]))
                    except ValueError:
                        pass
        tables[variant] = {name: mnk + (statistics.median(ms),) for name, (mnk, ms) in samples.items()}
    return tables


FOUND = re.compile(r"found fastest for \w+\(([^)]*)\) (\S+) \[([\d.e+-]+) ms, Default ([\d.e+-]+) ms")


def tuned_choices(text):
    """params signature -> "choice (a / b ms)" from the tuner's log lines (TUNABLEOP_VERBOSE >= 1)."""
    out = {}
    for m in FOUND.finditer(text or ""):
        out[m.group(1)] = "%s (%.4g / %.4g)" % (m.group(2), float(m.group(3)), float(m.group(4)))
    return out


def suite_ab_rows(text):
    """linear_suite.py --ab lines: (shape, m, n, k, plain_ms, ours_ms, max_rel_diff)."""
    rows = []
    for line in (text or "").splitlines():
        parts = line.strip().split(",")
        if len(parts) == 7 and "@" in parts[0]:
            try:
                rows.append((parts[0], int(parts[1]), int(parts[2]), int(parts[3]), float(parts[4]), float(parts[5]),
                             parts[6]))
            except ValueError:
                pass
    return rows


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logdir")
    ap.add_argument("--suite-csv", default="")
    a = ap.parse_args()
    d = a.logdir
    out = []
    machine = (read(d, "machine.txt") or "").strip().splitlines()
    out.append("# tunableop run on unmodified programs (scripts/gpu-interpose.sh)\n")
    if machine:
        out.append("Machine: " + "; ".join(machine[:3]) + "\n")
    steps = read(d, "steps.txt") or ""
    out.append("Steps: " + " | ".join(l for l in steps.splitlines() if l) + "\n")

    test = read(d, "ctest_interpose.txt") or ""
    m = re.search(r"(\d+% tests passed.*)", test)
    skipped = re.findall(r"\d+ - (\S+) \(Skipped\)", test)
    out.append("## CUDA interposer test\n\n" + (m.group(1) if m else "not run / no result") +
               (" -- SKIPPED: " + ", ".join(skipped) if skipped else "") + "\n")

    out.append("## Host time per call, in-process A/B (small GEMMs, host time only; medians)\n")
    out.append("One process per mode runs the library's real entry point (found as the hooks find it) and the "
               "hooked one in interleaved blocks; \"hooked - real\" is the median of the per-round paired "
               "differences (quartiles beside it). Modes: `tunableop run --tune` (the hooked call is served by "
               "the tuned choice, or passed to the library when Default won), `--no-tune` without results "
               "(hook + engine + the library's call), and disabled (the inert hook). Target: under 1 us per "
               "served call on the GPU.\n")
    header = None
    rows = []
    for name in AB_LOGS:
        text = read(d, name + ".txt") or ""
        for line in text.splitlines():
            if line.startswith("| entry point"):
                header = line
            elif line.startswith("| ") and not line.startswith("|---"):
                rows.append(line)
            elif "skipped" in line or "failed" in line or "differs" in line:
                rows.append("| %s: %s |" % (name, line.strip()))
    if rows:
        out.append((header or "| entry point | mode | real ns | hooked ns | hooked - real ns | quartiles | rounds x "
                    "block | hooked calls: served / library default / passed |"))
        out.append("|" + "---|" * (header.count("|") - 1 if header else 8))
        out.extend(rows)
    else:
        out.append("not run / no result")
    out.append("")

    out.append("## Seed Example 1 (fp32 512x2048 @ 2048x1024, 10,000 iterations)\n")
    out.append("| run | iter/s | vs plain | interposer |\n|---|---|---|---|")
    base = number(read(d, "ex1_plain.txt"), r"([\d.]+) iter/s")
    for name, label in (("plain", "plain PyTorch"), ("pytorch", "PYTORCH_TUNABLEOP_ENABLED=1"),
                        ("ours", "tunableop run --tune")):
        text = read(d, "ex1_%s.txt" % name)
        v = number(text, r"([\d.]+) iter/s")
        out.append("| %s | %s | %s | %s |" % (label, fmt(v), ratio(v, base), interpose_fraction(text) if name == "ours" else ""))

    t = suite_rows(d)
    budgets = (read(d, "suite_budgets.txt") or "").strip()
    out.append("\n## F.linear suite (34 bf16 shapes, CUDA graph replay, rotating inputs > L2)\n")
    if budgets:
        out.append("Tuning budgets: " + budgets + "\n")
    choices = tuned_choices(read(d, "suite_ours.txt"))
    out.append("| shape | m x n x k | plain ms | PyTorch TunableOp ms | ours ms | ours/plain | ours/PyTorch TunableOp "
               "| our choice (tuner: its ms / Default's ms) |")
    out.append("|---|---|---|---|---|---|---|---|")
    sp_plain, sp_pt = [], []
    csv = ["shape,m,n,k,plain_ms,pytorch_tunableop_ms,ours_ms"]
    for shape, (mm, nn, kk, p_ms) in t["plain"].items():
        pt = t["pytorch"].get(shape, (0, 0, 0, None))[3]
        o = t["ours"].get(shape, (0, 0, 0, None))[3]
        s1 = p_ms / o if o else None
        s2 = pt / o if o and pt else None
        if s1:
            sp_plain.append(s1)
        if s2:
            sp_pt.append(s2)
        out.append("| %s | %dx%dx%d | %.4f | %s | %s | %s | %s | %s |" % (
            shape, mm, nn, kk, p_ms, fmt(pt, 4), fmt(o, 4), fmt(s1, 3), fmt(s2, 3),
            choices.get("tn_%d_%d_%d" % (mm, nn, kk), "-")))
        csv.append("%s,%d,%d,%d,%.5f,%s,%s" % (shape, mm, nn, kk, p_ms, "" if pt is None else "%.5f" % pt,
                                               "" if o is None else "%.5f" % o))
    g1, g2 = geomean(sp_plain), geomean(sp_pt)
    out.append("\nshapes timed: plain %d, PyTorch TunableOp %d, ours %d; geomean ours/plain %s (min %s), "
               "ours/PyTorch TunableOp %s (min %s). Targets: >= 1.2x geomean over plain, no shape below 0.98x.\n"
               % (len(t["plain"]), len(t["pytorch"]), len(t["ours"]), fmt(g1, 3), fmt(min(sp_plain) if sp_plain else None, 3),
                  fmt(g2, 3), fmt(min(sp_pt) if sp_pt else None, 3)))
    out.append("ours: " + interpose_fraction(read(d, "suite_ours.txt")) + "\n")

    ab = suite_ab_rows(read(d, "suite_ab.txt"))
    out.append("### The same, in one process (`linear_suite.py --ab`)\n")
    out.append("Per shape, a graph captured with the interposer switched off (PyTorch's own calls) and one with "
               "it on (ours, served from the suite's results), replayed in alternation, 7 rounds, medians; "
               "\"max rel diff\" compares their outputs.\n")
    if ab:
        out.append("| shape | m x n x k | plain ms | ours ms | ours/plain | max rel diff |\n|---|---|---|---|---|---|")
        for name, mm, nn, kk, p_ms, o_ms, diff in ab:
            out.append("| %s | %dx%dx%d | %.4f | %.4f | %.3f | %s |" % (name, mm, nn, kk, p_ms, o_ms, p_ms / o_ms, diff))
        sp = [r[4] / r[5] for r in ab if r[5] > 0]
        low = [r[0] for r in ab if r[5] > 0 and r[4] / r[5] < 0.98]
        out.append("\nin one process: %d shapes, geomean ours/plain %s (min %s); below 0.98x: %s\n" % (
            len(ab), fmt(geomean(sp), 3), fmt(min(sp) if sp else None, 3), ", ".join(low) if low else "none"))
    else:
        out.append("not run / no result\n")
    if a.suite_csv:
        with open(a.suite_csv, "w") as f:
            f.write("\n".join(csv) + "\n")

    out.append("## Seed Example 2 (HF transformers, Gemma-2B shape, random weights, bf16, static cache, 256 tokens)\n")
    out.append("| decode | run | tokens/s | vs plain | interposer |\n|---|---|---|---|---|")
    for mode in ("eager", "compiled"):
        base = number(read(d, "ex2_%s_plain.txt" % mode), r"Tokens/second: ([\d.]+)")
        for name, label in (("plain", "plain"), ("pytorch", "PyTorch TunableOp"), ("ours", "tunableop run --tune")):
            text = read(d, "ex2_%s_%s.txt" % (mode, name))
            v = number(text, r"Tokens/second: ([\d.]+)")
            out.append("| %s | %s | %s | %s | %s |" % (mode, label, fmt(v, 2), ratio(v, base),
                                                       interpose_fraction(text) if name == "ours" else ""))
    print("\n".join(out))


if __name__ == "__main__":
    main()
