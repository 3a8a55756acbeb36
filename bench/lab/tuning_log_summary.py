#!/usr/bin/env python3
"""Reads a tuner tree log (TUNABLEOP_VERBOSE=3) whose lines carry a leading time stamp in ms
("<ms> <line>", as `tuning_log_summary.py --stamp` writes them) and prints, per problem, where
the tuning time went: screening (probe, screen, numerics) up to the halving, the halving
rounds, the final interleaved re-measurement and decision; plus the decision lines (keeping
Default, re-checking). Used by bench/lab/gpu-tuning.sh (issue 10).

  some_command 2> >(python3 bench/lab/tuning_log_summary.py --stamp > log)
  python3 bench/lab/tuning_log_summary.py log [--only SUBSTRING]
"""
import re
import sys
import time


def stamp():
    t0 = time.monotonic()
    for line in sys.stdin:
        sys.stdout.write("%9.1f %s" % ((time.monotonic() - t0) * 1000.0, line))
        sys.stdout.flush()


def summarize(path, only):
    problems = []
    cur = None
    for raw in open(path, errors="replace"):
        m = re.match(r"\s*([0-9.]+) (.*)", raw.rstrip("\n"))
        if not m:
            continue
        t, line = float(m.group(1)), m.group(2)
        if line.startswith("finding fastest for "):
            cur = {"what": line.split()[3], "start": t, "halve": None, "remeasure": None, "end": None,
                   "skipped_cold": 0, "skipped": 0, "halved": 0, "notes": [], "winner": ""}
            problems.append(cur)
            continue
        if cur is None or cur["end"] is not None:
            continue
        if ("halving round" in line or "halved out" in line) and cur["halve"] is None:
            cur["halve"] = t
        if "re-measured" in line and cur["remeasure"] is None:
            cur["remeasure"] = t
        if "skip slow instance" in line:
            cur["skipped"] += 1
            if "first run" in line:
                cur["skipped_cold"] += 1
        if "halved out" in line:
            cur["halved"] += 1
        if "keeping Default" in line or "re-checking" in line or "beats Default again" in line:
            cur["notes"].append(line.strip("├─ "))
        if line.startswith("└──found fastest"):
            cur["end"] = t
            mm = re.search(r"\) (\S+) \[(.*)\]", line)
            cur["winner"] = mm.group(1) + " [" + mm.group(2) + "]" if mm else line
    for p in problems:
        if only and only not in p["what"]:
            continue
        end = p["end"] if p["end"] is not None else p["start"]
        halve = p["halve"] or p["remeasure"] or end
        remeasure = p["remeasure"] or end
        print("%-48s total %5.0f ms: screening %5.0f, halving %4.0f, re-measure+decide %4.0f; skipped slow %d (%d on"
              " the first run), halved out %d -> %s" % (
                  p["what"], end - p["start"], halve - p["start"], remeasure - halve, end - remeasure,
                  p["skipped"], p["skipped_cold"], p["halved"], p["winner"]))
        for n in p["notes"]:
            print("     " + n)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--stamp":
        stamp()
    else:
        only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
        summarize(sys.argv[1], only)
