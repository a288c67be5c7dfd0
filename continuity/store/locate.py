"""Open the store a location names: a folder is the JSONL store, a ``postgresql://`` URL the
PostgreSQL backend (ADR 0025).

Everything that takes ``--store`` or ``$CONTINUITY_HOME`` opens its store here, so a command,
a hook or a runtime works the same on either. The PostgreSQL module (and psycopg) is imported
only when a URL is opened: ``import continuity`` and the JSONL hook path never pay for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from continuity import frames as fr
from continuity.paths import StoreLocation, is_store_url
from continuity.store.base import BaseStore, Recovery

__all__ = ["open_store"]


def open_store(
    location: StoreLocation | os.PathLike[str],
    *,
    create: bool = False,
    durable: bool = True,
    on_recovery: Callable[[Recovery], None] | None = None,
    redactor: Callable[[fr.Frame], fr.Frame] | None = None,
    **options: Any,
) -> BaseStore:
    """The store at ``location``. ``create``: make it when missing (a folder and its marker; a
    database's schema); otherwise a missing store is :class:`~continuity.StoreNotFound`.
    ``durable``: an append returns once it is on stable storage (fsync; a synchronous commit).
    ``on_recovery`` hears of each torn tail a JSONL store moves aside when it opens a thread (a
    server's transactions leave none). Other ``options`` go to the backend (``clock``; for a
    server ``schema``, ``pool_size``, ``connect_timeout``)."""
    if is_store_url(location):
        blocked: object = sys.modules.get("typing_extensions", False)
        if blocked is None:
            # The hook and search fast paths keep typing_extensions out of a process that does
            # not need it (continuity.__main__); psycopg does.
            del sys.modules["typing_extensions"]
        from continuity.store.postgres import PostgresStore

        return PostgresStore(
            str(location), create=create, durable=durable, redactor=redactor, **options
        )
    from continuity.store.jsonl import Store

    return Store(
        location,
        create=create,
        durable=durable,
        on_recovery=on_recovery,
        redactor=redactor,
        **options,
    )
