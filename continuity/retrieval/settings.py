"""The store's search settings: which model every search of the store fuses (ADR 0033).

One file, ``<store>/search.json`` (the store's folder on this machine,
:attr:`~continuity.store.base.BaseStore.local_dir`; a server's is under the default folder),
written by ``continuity model use NAME`` (``--none`` takes it away)::

    {"model": "sentence-transformers/all-MiniLM-L6-v2", "embed_budget": 32}

``model`` is a fetched model's name or a model folder's absolute path. Every search of the
store fuses it with BM25: ``continuity search`` (``--model`` and ``$CONTINUITY_MODEL`` still
choose another for one command), ``compile --recall``, the Claude Code hook's
``recall_on_prompt``, the viewer's search and the MCP server's ``search`` tool. Without the
file (or without ``model``) every one of them is BM25 alone, as before.

``embed_budget``: how many documents the Claude Code hook's recall, or one call of the MCP
server's ``search`` tool, may embed (the rest of the store is searched as its vector cache holds
it: ``continuity index`` fills it). A command and the viewer embed all they need, with progress.

``embedder`` (ADR 0047), written only by ``continuity model use NAME --embedder KIND``: the
embedder kind the model is loaded as (``bert``, ``static``, or one an installed package adds,
:data:`~continuity.retrieval.models.EMBEDDERS`), instead of the kind its folder is recognised
as. A file without it (every file written before it existed) is read as before.

Reading it costs one small file read and msgspec: the hook path may read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from continuity.errors import InvalidSettings

if TYPE_CHECKING:
    from continuity.retrieval.embedders import Embedder
    from continuity.store.base import BaseStore

__all__ = [
    "FILE",
    "SearchSettings",
    "configured_embedder",
    "read_search_settings",
    "write_search_settings",
]

FILE: Final = "search.json"


class SearchSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    model: str | None = None
    """The model every search of the store fuses with BM25 (a name or a folder)."""
    embed_budget: int = 32
    """Documents a hook's recall or an MCP search may embed; the rest is searched as cached."""
    embedder: str | None = None
    """The embedder kind ``model`` is loaded as; None: the kind its folder is recognised as."""


def _path(store: BaseStore) -> Path | None:
    return None if store.local_dir is None else store.local_dir / FILE


def read_search_settings(store: BaseStore) -> SearchSettings:
    """The store's search settings (the defaults when it has none); :class:`InvalidSettings`
    naming the file when it cannot be read as settings."""
    path = _path(store)
    if path is None:
        return SearchSettings()
    try:
        settings = msgspec.json.decode(path.read_bytes(), type=SearchSettings)
    except FileNotFoundError:
        return SearchSettings()
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidSettings(f"{path}: {exc} (`continuity model use` rewrites it)") from None
    if settings.embed_budget < 0:
        raise InvalidSettings(f"{path}: embed_budget must be 0 or more")
    if settings.embedder == "":
        raise InvalidSettings(f"{path}: embedder names no kind (leave it out to recognise it)")
    return settings


def write_search_settings(store: BaseStore, settings: SearchSettings) -> Path:
    """Write the store's search settings atomically; the file's path."""
    from continuity._fs import atomic_write

    path = _path(store)
    if path is None:
        raise InvalidSettings("this store has no folder on this machine for its settings")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, msgspec.json.format(msgspec.json.encode(settings)) + b"\n", durable=True)
    return path


def configured_embedder(store: BaseStore, chosen: str | None = None) -> Embedder | None:
    """The embedder ``chosen`` names (of the kind its folder is recognised as), else the
    store's configured model (of the kind the settings name, if they do), loaded; None when
    neither names one (BM25 alone)."""
    settings = SearchSettings(model=chosen) if chosen else read_search_settings(store)
    if not settings.model:
        return None
    from continuity.retrieval.models import load_model

    return load_model(settings.model, kind=settings.embedder)
