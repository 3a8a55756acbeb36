#!/usr/bin/env python3
"""`tunableop run` itself: the environment it gives the command, exit statuses, bad usage.
  run_command_test.py TUNABLEOP_BIN PRELOAD_LIB
"""
import os
import subprocess
import sys

BIN, PRELOAD = sys.argv[1], os.path.realpath(sys.argv[2])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def run(args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUNABLEOP_", "PYTORCH_TUNABLEOP_"))}
    env.pop("LD_PRELOAD", None)
    env.update(env_extra or {})
    return subprocess.run([BIN, "run"] + args, env=env, capture_output=True, text=True, timeout=60)


def env_of(out):
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


# --record: the settings and the preload library, ours first and the caller's kept.
p = run(["--record", "--results", "r%d.csv", "-v", "1", "--", "env"], {"LD_PRELOAD": "/other/lib.so"})
check(p.returncode == 0, "env under --record exited %d: %s" % (p.returncode, p.stderr))
e = env_of(p.stdout)
check(e.get("LD_PRELOAD") == PRELOAD + ":/other/lib.so", "LD_PRELOAD is %r" % e.get("LD_PRELOAD"))
check(e.get("TUNABLEOP_ENABLED") == "1", "TUNABLEOP_ENABLED not 1")
check(e.get("TUNABLEOP_TUNING") == "0", "--record must turn tuning off")
check(e.get("TUNABLEOP_RECORD_UNTUNED") == "1", "--record must record")
check(e.get("TUNABLEOP_FILENAME") == "r%d.csv", "--results not passed on")
check(e.get("TUNABLEOP_VERBOSE") == "1", "-v not passed on")

p = run(["--tune", "--", "env"])
e = env_of(p.stdout)
check(e.get("TUNABLEOP_TUNING") == "1" and e.get("LD_PRELOAD") == PRELOAD, "--tune: %s" % e)
p = run(["--no-tune", "--", "env"])
check(env_of(p.stdout).get("TUNABLEOP_TUNING") == "0", "--no-tune must turn tuning off")

# The command's own exit status; the shell's codes when it cannot start.
check(run(["--", "sh", "-c", "exit 3"]).returncode == 3, "exit status of the command not kept")
p = run(["--", "/nonexistent/program"])
check(p.returncode == 127 and "cannot run /nonexistent/program" in p.stderr, "missing command: %d %s" %
      (p.returncode, p.stderr))
# Bad usage: conflicting modes, no command, a preload library that is not there.
check(run(["--tune", "--no-tune", "--", "true"]).returncode != 0, "--tune with --no-tune accepted")
check(run([]).returncode != 0, "no command accepted")
p = run(["--", "true"], {"TUNABLEOP_PRELOAD_LIBRARY": "/nonexistent/libtunableop_preload.so"})
check(p.returncode == 1 and "cannot find" in p.stderr, "missing preload library: %d %s" % (p.returncode, p.stderr))

print("FAILED: %d" % len(failures) if failures else "PASS")
sys.exit(1 if failures else 0)
