"""Versioned schema migrations for the SQL stores and the SQLite catalog.

Each track (``sqlite``, ``postgres``, ``catalog``) is a folder of ``NNNN_name.sql`` files applied
in order; the applied versions are recorded in ``tl_schema_migrations`` so running the upgrade
again applies nothing. ``threadline db upgrade URL`` runs them for a database store.
"""

from __future__ import annotations

from importlib import resources


def scripts(track: str) -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` of every migration of ``track``, oldest first."""
    folder = resources.files(__name__).joinpath(track)
    out = []
    for item in folder.iterdir():
        name = item.name
        if name.endswith(".sql") and name[:4].isdigit():
            out.append((int(name[:4]), name, item.read_text(encoding="utf-8")))
    return sorted(out)


def latest(track: str) -> int:
    found = scripts(track)
    return found[-1][0] if found else 0
