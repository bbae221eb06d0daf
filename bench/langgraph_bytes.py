"""Bytes per entry kind of a ThreadlineSaver thread on a JSONL store (issue 16).

    .venv/bin/python bench/langgraph_bytes.py [--size 1000] [--pad 4]

Runs tests/_langgraph_chat.py turn by turn until the thread holds ``--size`` messages, then
prints the session file's bytes by entry kind (custom entries by ``custom_type``) and the
ratio to the messages as JSONL (their LangChain JSON, one per line), as langgraph_compare.py
counts it, and to the same messages appended to a plain threadline session on a JSONL store (the
conversation as threadline stores it without any checkpoint).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "src"))

import threadline as tl  # noqa: E402
from _langgraph_chat import build, user  # noqa: E402
from threadline.formats.langchain import to_message  # noqa: E402
from threadline.integrations.langgraph import ThreadlineSaver  # noqa: E402

SEP = (",", ":")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--pad", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        store = tl.open_store(str(root))
        config = {"configurable": {"thread_id": "bytes"}}
        with ThreadlineSaver(store) as saver:
            graph = build(saver, args.pad)
            turn = 1
            count = 0
            while count < args.size:
                state = graph.invoke(
                    {"messages": [user(turn, args.pad)]}, config, durability="sync"
                )
                count = len(state["messages"])
                turn += 1
            messages = graph.get_state(config).values["messages"]
        store.close()
        plain_store = tl.open_store(str(Path(tmp) / "plain"), durability="flush")
        plain = plain_store.create()
        with plain.batch():
            for m in messages:
                plain.append_message(to_message(m))
        plain.close()
        plain_bytes = (Path(tmp) / "plain" / f"{plain.id}.jsonl").stat().st_size
        jsonl = sum(len(m.model_dump_json()) + 1 for m in messages)
        total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        size: Counter[str] = Counter()
        count: Counter[str] = Counter()
        payload: Counter[str] = Counter()  # custom entries' data, the writes a message carries
        for path in root.rglob("*.jsonl"):
            for line in path.read_bytes().splitlines(keepends=True):
                rec = json.loads(line)
                kind = rec.get("type", "?")
                if kind == "custom":
                    kind = "custom " + str(rec["custom"].get("custom_type"))
                    payload[kind] += len(json.dumps(rec["custom"].get("data"), separators=SEP))
                elif kind == "message":
                    carried = (rec["message"].get("provider_details") or {}).get("langgraph")
                    if carried is not None:
                        kind = "message carrying writes"
                        payload[kind] += len(json.dumps(carried, separators=SEP))
                size[kind] += len(line)
                count[kind] += 1
    print(
        f"messages={len(messages)} turns={turn - 1} jsonl={jsonl:,} bytes={total:,} "
        f"ratio={total / jsonl:.2f}x"
    )
    print(
        f"the same messages as a plain threadline session: {plain_bytes:,} bytes "
        f"({plain_bytes / jsonl:.2f}x their LangChain JSON); the thread is "
        f"{total / plain_bytes:.2f}x that session"
    )
    for kind, b in size.most_common():
        n = count[kind]
        extra = f" (data {payload[kind] / n:.0f}/entry)" if payload[kind] else ""
        print(
            f"  {kind:26} {n:5} entries {b:>10,} bytes {b / n:5.0f}/entry {b / jsonl:5.2f}x{extra}"
        )


if __name__ == "__main__":
    main()
