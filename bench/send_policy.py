"""What the send policy costs on top of a format's shaping (issue 14).

For the largest real sessions in ../shared/realdata, times ``module.shape(messages)`` (the
format's mapping alone) and ``module.dump(messages)`` (send policy, then the same mapping) side
by side in one process, alternating, and prints the medians and their ratio per format.

    .venv/bin/python bench/send_policy.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from threadline import formats, importing

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"
SOURCES = [
    ("claude_code", "claude_code/marot_spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"),
    ("pi", "pi_session/badlogic_pi-mono__large-session.jsonl"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(f"{'session':<14} {'format':<17} {'msgs':>5} {'shape ms':>9} {'dump ms':>8} {'ratio':>6}")
    for fmt, rel in SOURCES:
        (draft,) = importing.prepare(fmt, REALDATA / rel)
        messages = importing.messages_of(draft)
        for name in formats.PROVIDER_FORMATS:
            module = formats.get(name)
            shape_t, dump_t = [], []
            for _ in range(args.runs):
                t = time.perf_counter()
                module.shape(messages)
                shape_t.append(time.perf_counter() - t)
                t = time.perf_counter()
                module.dump(messages)
                dump_t.append(time.perf_counter() - t)
            a, b = statistics.median(shape_t) * 1000, statistics.median(dump_t) * 1000
            print(f"{fmt:<14} {name:<17} {len(messages):>5} {a:>9.2f} {b:>8.2f} {b / a:>6.2f}")


if __name__ == "__main__":
    main()
