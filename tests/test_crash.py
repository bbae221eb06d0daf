"""Crash safety of the JSONL store (DESIGN §3): SIGKILL a writer mid-stream, 100 trials.

The child process and the checks are in _crash_writer.py (bench/crash_trials.py runs 1,000 of the
same trials). Each trial checks: no acknowledged entry lost or changed, the session loads with a
clean report apart from the torn tail, the torn tail lands in ``<id>.jsonl.torn`` on the first
append, and that append survives a reopen.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _crash_writer import run_trial, self_kills

TRIALS = 100


@pytest.mark.parametrize("seed", range(TRIALS))
def test_a_writer_killed_mid_stream_loses_no_acknowledged_entry(tmp_path: Path, seed: int
                                                                ) -> None:
    result = run_trial(tmp_path, seed)
    if self_kills(seed) and result.exists:
        # the child died inside a partial write of a record: the tail must have torn
        assert result.torn_bytes > 0
