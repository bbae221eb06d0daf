"""docs/cli.md is the CLI's own --help output; regenerate it when a command changes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_cli_reference_matches_the_commands_help() -> None:
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "scripts" / "cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == module.reference(), (
        "docs/cli.md is stale: run .venv/bin/python scripts/cli_reference.py > docs/cli.md"
    )
