"""threadline: a conversation-history engine for LLM agents.

import threadline as tl
store = tl.open_store()            # ~/.threadline (JSONL files), or a URL
s = store.create()
s.append_message("user", "Hello")
s.context().messages               # what the provider receives
"""

from typing import TYPE_CHECKING, Any

from threadline.context import Context, ViewItem
from threadline.errors import (
    LimitError,
    NotFoundError,
    ProviderError,
    SessionLockedError,
    StoreError,
    ThreadlineError,
    UserError,
)
from threadline.history import PurgePlan
from threadline.model.content import (
    Message,
    content_hash,
    image,
    image_url,
    text,
    thinking,
    tool_result,
    tool_use,
)
from threadline.operations import OperationInfo
from threadline.session import EntryMeta, FlatNode, Session, TreeNode
from threadline.store.base import SessionListing, SessionSummary
from threadline.stores import Store, open_path, open_store

if TYPE_CHECKING:
    from threadline import formats
    from threadline.agent import AgentSession
else:
    # Loaded when first named: an application that only stores and reads sessions does not
    # pay for the format converters, the importers and the agent loop (hashlib's OpenSSL,
    # tempfile, compaction): ~5 MB of memory and a third of the import time.
    def __getattr__(name: str) -> Any:
        if name == "formats":
            import importlib

            return importlib.import_module("threadline.formats")
        if name == "AgentSession":
            from threadline.agent import AgentSession

            return AgentSession
        raise AttributeError(f"module 'threadline' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "AgentSession",
    "Context",
    "EntryMeta",
    "FlatNode",
    "LimitError",
    "Message",
    "NotFoundError",
    "OperationInfo",
    "ProviderError",
    "PurgePlan",
    "Session",
    "SessionListing",
    "SessionLockedError",
    "SessionSummary",
    "Store",
    "StoreError",
    "ThreadlineError",
    "TreeNode",
    "UserError",
    "ViewItem",
    "__version__",
    "content_hash",
    "formats",
    "image",
    "image_url",
    "open_path",
    "open_store",
    "text",
    "thinking",
    "tool_result",
    "tool_use",
]
