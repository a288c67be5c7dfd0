"""The continuity thread a framework's own id maps to (a LangGraph ``thread_id``, an Agents SDK
``session_id``): what the integrations share, so each maps ids the same way."""

from __future__ import annotations

import blake3

from continuity.errors import InvalidThreadId
from continuity.store.base import validate_thread_id

__all__ = ["safe_thread_id"]


def safe_thread_id(name: str, *, prefix: str) -> str:
    """``name`` itself when it is a valid continuity thread id, else ``prefix`` and a hash of
    it (any string maps: separators, spaces, any script, any length). The caller keeps the
    original in the thread's first frame, so a listing can name it and a collision is seen."""
    try:
        return validate_thread_id(name)
    except InvalidThreadId:  # too long, empty, or characters a file name cannot hold
        return prefix + blake3.blake3(name.encode("utf-8", "surrogatepass")).hexdigest()[:40]
