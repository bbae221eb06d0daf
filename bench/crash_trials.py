"""1,000 crash trials of the JSONL store: a writer SIGKILLed mid-stream (DESIGN §3).

    .venv/bin/python bench/crash_trials.py [--trials 1000] [--start 0]

Each trial is tests/_crash_writer.py's ``run_trial`` (the same one the suite runs 100 times): a
child appends with writes slowed and capped to a few bytes per call, is killed with SIGKILL, and the
parent checks that no acknowledged entry was lost, the session loads, the torn tail moved to
``<id>.jsonl.torn`` and an append after the crash survives a reopen. Prints how the kills landed.
Exits 1 on the first failing trial, naming its seed (rerun one with ``--start SEED --trials 1``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _crash_writer import batches, run_trial, self_kills


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    stats = {
        "trials": 0,
        "acked": 0,
        "torn": 0,
        "in_flight_landed": 0,
        "killed_in_create": 0,
        "external_kills_torn": 0,
        "external_kills": 0,
        "self_kills_torn": 0,
        "self_kills": 0,
        "in_batch": 0,
        "batch_landed": 0,
        "batched_trials": 0,
    }
    for seed in range(args.start, args.start + args.trials):
        with tempfile.TemporaryDirectory(prefix="crash-") as tmp:
            try:
                r = run_trial(Path(tmp), seed)
            except AssertionError as exc:
                print(f"FAILED: {exc}", file=sys.stderr)
                return 1
        stats["trials"] += 1
        stats["acked"] += r.acked
        stats["torn"] += r.torn_bytes > 0
        stats["in_flight_landed"] += r.extra_entry
        stats["killed_in_create"] += not r.exists
        stats["batched_trials"] += batches(seed)
        for note in r.notes:
            if note.startswith("killed inside a batch"):
                stats["in_batch"] += 1
                stats["batch_landed"] += not note.endswith(", 0 landed")
        if not self_kills(seed):
            stats["external_kills"] += 1
            stats["external_kills_torn"] += r.torn_bytes > 0
        elif r.exists:
            stats["self_kills"] += 1
            stats["self_kills_torn"] += r.torn_bytes > 0
        if stats["trials"] % 100 == 0:
            print(f"{stats['trials']} trials ok ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(
        f"{stats['trials']} trials, 0 failures in {time.perf_counter() - t0:.1f} s: "
        f"{stats['acked']} acknowledged operations, none lost; "
        f"{stats['torn']} sessions with a torn tail ({stats['external_kills_torn']} of "
        f"{stats['external_kills']} external kills, {stats['self_kills_torn']} of "
        f"{stats['self_kills']} self-kills mid-write after create); "
        f"{stats['in_flight_landed']} unacknowledged in-flight entries fully written; "
        f"{stats['killed_in_create']} kills inside create() left no session; "
        f"{stats['batched_trials']} trials wrote batches, {stats['in_batch']} were killed inside "
        f"a batch ({stats['batch_landed']} with part of it written, unacknowledged)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
