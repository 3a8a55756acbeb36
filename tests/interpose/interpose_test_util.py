"""What the interposer's program drivers share (run_interposed.py, exit_threads_test.py,
cases_test.py): small tuning budgets, a clean environment, failing with a message, and the
entry lines of a results or untuned file."""
import os
import sys

# Small budgets: the tests check behaviour, not speed.
FAST = {
    "TUNABLEOP_MAX_TUNING_DURATION_MS": "2",
    "TUNABLEOP_MAX_WARMUP_DURATION_MS": "1",
    "TUNABLEOP_MAX_PROBLEM_DURATION_MS": "2000",
    "TUNABLEOP_ROTATING_BUFFER_SIZE": "0",
    "TUNABLEOP_VERBOSE": "1",
}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def clean_env(**extra):
    """This process's environment without any TUNABLEOP_* setting or LD_PRELOAD, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUNABLEOP_", "PYTORCH_TUNABLEOP_"))}
    env.pop("LD_PRELOAD", None)
    env.update(extra)
    return env


def entry_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l for l in f.read().splitlines() if l and not l.startswith("Validator,")]
