"""The catalog: a cross-session index of a store (DESIGN §9). See :mod:`threadline.catalog.base`."""

from threadline.catalog.base import *  # noqa: F403
from threadline.catalog.base import (  # private helpers other modules use
    RRF_K,
    Catalog,
    CatalogSession,
    Filters,
    Hit,
    IndexStatus,
    Key,
    TagPlan,
    TagResult,
    fts_terms,
    validate_tag,
)
from threadline.model.search_text import embed_text, message_text

__all__ = [
    "RRF_K",
    "Catalog",
    "CatalogSession",
    "Filters",
    "Hit",
    "IndexStatus",
    "Key",
    "TagPlan",
    "TagResult",
    "embed_text",
    "fts_terms",
    "message_text",
    "validate_tag",
]
