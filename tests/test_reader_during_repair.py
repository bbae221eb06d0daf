"""A reader never dies while another process repairs a torn tail (issue 13 item 5): the JSONL
store reads with pread, so a truncation under a reader shortens a read instead of raising
SIGBUS on a mapped page past the new end of the file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import threadline as tl

READER = textwrap.dedent("""
    import sys, time
    import threadline as tl
    store = tl.open_store(sys.argv[1])
    deadline = time.monotonic() + float(sys.argv[3])
    loads = 0
    while time.monotonic() < deadline:
        s = store.open(sys.argv[2], read_only=True)
        texts = [m.text for m in s.context().messages]
        assert texts[:2] == ["first", "second"], texts[:2]
        loads += 1
    print(loads, flush=True)
""")


def test_a_reader_survives_writers_repairing_torn_tails_under_it(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create()
    s.append_message("user", "first")
    s.append_message("assistant", "second")
    s.close()
    path = tmp_path / f"{s.id}.jsonl"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(tmp_path), s.id, "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    repairs = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        # a torn tail of several pages, as a writer killed mid-write leaves it
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b'{"type":"message","id":"torn","parent_id":null,"message":' + b"x" * 65536)
        os.close(fd)
        time.sleep(0.002)  # let the reader map (or read) the torn pages
        w = store.open(s.id)
        w.append_message("user", f"after repair {repairs}")  # repairs: truncates the tail
        w.close()
        repairs += 1
    out, err = reader.communicate(timeout=60)
    assert (reader.returncode, err) == (0, "")
    assert int(out) > 0 and repairs > 0
    again = store.open(s.id, read_only=True)
    assert again.load_report.torn_bytes == 0
    assert [m.text for m in again.context().messages] == (
        ["first", "second"] + [f"after repair {i}" for i in range(repairs)]
    )
