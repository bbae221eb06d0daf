"""Longer runs of the LangGraph rebuild test (tests/test_langgraph_rebuild.py) than the test
suite's few examples: random operations on one saver (or two taking turns), then every read
of the writer, of a fresh saver and of a fresh saver's branch read compared with the
reference. Seeds make each run repeatable (issue 16).

    THREADLINE_REALDATA=... .venv/bin/python bench/langgraph_rebuild.py --store jsonl \\
        --seeds 0 200 [--savers 2] [--steps 30]

Prints each failing seed (the assertion says which read and checkpoint differed) and a
closing line: seeds run, failures, seconds.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "src"))

from conftest import make_store  # noqa: E402
from test_langgraph_rebuild import check_rebuild  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", choices=["jsonl", "sqlite", "postgres"], default="jsonl")
    ap.add_argument("--seeds", type=int, nargs=2, default=[0, 100], metavar=("FIRST", "END"))
    ap.add_argument("--savers", type=int, choices=[1, 2], default=1)
    ap.add_argument("--steps", type=int, default=24, help="at most this many operations a seed")
    args = ap.parse_args()
    failures = refused = 0
    started = time.perf_counter()
    for seed in range(*args.seeds):
        rnd = random.Random(seed)

        def draw(kind: str, arg: Any, rnd: random.Random = rnd) -> Any:
            return rnd.choice(arg) if kind == "pick" else rnd.randint(*arg)

        folder = tempfile.mkdtemp(prefix="lg-rebuild-")
        store = make_store(args.store, Path(folder))
        try:
            refused += check_rebuild(store, draw, rnd.randint(4, args.steps), args.savers)
        except Exception as exc:  # a difference (AssertionError) or an error: report the seed
            failures += 1
            print(f"seed {seed}: {type(exc).__name__}: {str(exc)[:300]}")
        finally:
            store.close()
            shutil.rmtree(folder, ignore_errors=True)
    seconds = time.perf_counter() - started
    seeds = args.seeds[1] - args.seeds[0]
    print(
        f"{args.store}, {args.savers} saver(s): {seeds} seeds, {failures} failed, "
        f"{refused} writes refused by the other saver's lock, {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
