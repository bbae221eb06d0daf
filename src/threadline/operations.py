"""Context operations: reversible edits of the view (DESIGN §6).

Filled in by the operations work (issue 5). The hooks below are what context building calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadline.errors import NotFoundError
from threadline.model.content import Message

if TYPE_CHECKING:
    from threadline.session import Session


def apply_operations(session: Session, ids: list[str], op_ids: list[str],
                     active_tags: frozenset[str]) -> list[str]:
    """Apply the active operations on the path, in creation order, to the view ids."""
    return ids


def synthetic_message(session: Session, view_id: str) -> Message:
    """The message behind a synthetic view id ``<op_id>:<n>``."""
    raise NotFoundError(f"No message with view id '{view_id}' in session '{session.id}'")
