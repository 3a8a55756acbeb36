"""Reads what `tunableop llm --json --print-ids` wrote (the GPU scripts' summaries)."""
import json
import os


def load(logs, name, ext=".json"):
    """(the JSON object, the printed ids) of logs/name.json; ({}, []) when the run left none.

    NCCL may print a line on stdout before ours: the JSON is the line that starts with "{",
    the ids the last line after it.
    """
    try:
        with open(os.path.join(logs, name + ext)) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        at = next((i for i, l in enumerate(lines) if l.startswith("{")), None)
        j = json.loads(lines[at]) if at is not None else {}
        ids = lines[-1].split(",") if at is not None and len(lines) > at + 1 else []
        return j, ids
    except (OSError, ValueError):
        return {}, []
