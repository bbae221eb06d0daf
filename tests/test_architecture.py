"""The architecture is executable: no import cycle among threadline's modules, and a user's
script calling every public Session/Store method the docs name passes ``mypy --strict``.
(The layer contracts themselves run in ``./dev check``: ``lint-imports``.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp

HERE = Path(__file__).parent


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in adj:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        work = [(root, iter(adj[root]))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(adj[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_no_import_cycle_among_modules_function_level_imports_included() -> None:
    graph = grimp.build_graph("threadline", exclude_type_checking_imports=True)
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_a_user_script_over_the_documented_api_passes_mypy_strict() -> None:
    script = HERE / "typing" / "user_script.py"
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.stdout.strip() == "Success: no issues found in 1 source file", out.stdout


LAZY = (
    "_hashlib",
    "tempfile",
    "threadline.formats",
    "threadline.agent",
    "threadline.importing",
    "threadline.catalog",
)

IMPORT_THEN_USE = f"""
import sys
import threadline as tl
print(sorted(m for m in {LAZY!r} if m in sys.modules))
store = tl.open_store(sys.argv[1])
s = store.create()
s.append_message("user", "hi")
s.close()
again = store.open(s.id)
print([m.text for m in again.context().messages], len(again.tree()))
print("_hashlib" in sys.modules)
print(tl.formats.__name__, tl.AgentSession.__name__, "threadline.agent" in sys.modules)
"""


def test_import_threadline_leaves_formats_agent_catalog_and_openssl_until_first_used(
    tmp_path: Path,
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_THEN_USE, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "THREADLINE_EMBEDDER": "none"},
    )
    assert out.stdout.splitlines() == [
        "[]",  # ~5 MB less resident memory for a program that only stores sessions
        "['hi'] 1",
        "False",  # writing and reading a session hashes nothing
        "threadline.formats AgentSession True",
    ]
