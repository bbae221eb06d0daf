"""Print what an MCP client sees of ``threadline mcp`` as canonical JSON: the server's name,
version and instructions, every tool's listing (schemas, annotations) and the answers to a fixed
series of calls (results, refusals, invalid arguments, an unknown tool). Entry ids and
timestamps are replaced by placeholders, and the fields the mcp SDK itself adds in newer protocol
versions (``resultType``, ``serverInfo`` beyond name and version) are left out, so two runs on
different mcp releases print the same text exactly when clients see the same server.

scripts/mcp_versions.sh runs it with each release and compares the outputs.
    PYTHONPATH=src python scripts/mcp_wire.py
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import threadline as tl
from mcp_client import Client, over_stdio

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_context", {"session_id": "s1"}),
    ("get_context", {"session_id": "s1", "format": "anthropic"}),
    ("tag_messages", {"session_id": "s1", "start_idx": 0, "end_idx": 0, "tags": ["t"]}),
    ("digest_messages", {"session_id": "s1", "start_idx": 0, "end_idx": 0, "summary": "x"}),
    ("list_operations", {"session_id": "s1"}),
    ("snip_messages", {"session_id": "s1", "start_idx": 0, "end_idx": 9}),
    ("resequence_messages", {"session_id": "s1", "new_order": "not a list"}),
    ("get_context", {"session_id": "missing"}),
    ("delete_history_entries", {"session_id": "s1", "delete_all": True}),
    ("list_sessions", {}),
    ("no_such_tool", {}),
]
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TS = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z")
_TOKEN = re.compile(r'(confirmation_token\\?": ?\\?")[^"\\]+')


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items() if k != "resultType"}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


async def _observe(cs: Client) -> dict[str, Any]:
    info = cs.initialized
    seen: dict[str, Any] = {
        "server": {k: info["serverInfo"][k] for k in ("name", "version")},
        "instructions": info.get("instructions"),
        "tools": {
            name: {k: v for k, v in tool.items() if v is not None}
            for name, tool in (await cs.list_tools()).items()
        },
        "calls": [],
    }
    for name, arguments in CALLS:
        result = await cs.session.call_tool(name, arguments)
        answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        seen["calls"].append({"call": name, "arguments": arguments, "answer": answer})
    return seen


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "store"
        with tl.open_store(directory).create(session_id="s1") as s:
            s.append_message("user", "list the files")
            s.append_message("assistant", [tl.text("Listing."), tl.tool_use("c1", "ls", {})])
            s.append_message("tool", [tl.tool_result("c1", "a.txt")])
            s.append_message("assistant", "One file: a.txt.")
        seen = over_stdio(directory, Path(tmp) / "err.log", _observe)
    text = json.dumps(_canonical(seen), indent=1, sort_keys=True)
    text = _TOKEN.sub(r"\1TOKEN", _TS.sub("TIMESTAMP", _ID.sub("ID", text)))
    print(text)


if __name__ == "__main__":
    main()
