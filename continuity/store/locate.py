"""Open the store a location names: a folder is the JSONL store, a URL the backend its scheme
names (ADR 0025, ADR 0047).

Everything that takes ``--store`` or ``$CONTINUITY_HOME`` opens its store here, so a command,
a hook or a runtime works the same on any backend. A URL's backend is found by its scheme in
:data:`STORE_SCHEMES`: ``postgresql`` and ``postgres`` are built in; an installed package adds
a scheme under the entry-point group ``continuity.stores``::

    [project.entry-points."continuity.stores"]
    mystore = "my_package.store:open_my_store"

naming a :class:`StoreOpener`: a callable that takes :func:`open_store`'s arguments and returns
a :class:`~continuity.store.base.BaseStore` (a ``BaseStore`` subclass whose constructor takes
them is one). The installed packages' metadata is read only for a scheme that is not built in,
so a folder store or a PostgreSQL URL costs no scan. The PostgreSQL module (and psycopg) is
imported only when a URL is opened: ``import continuity`` and the JSONL hook path never pay
for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, Protocol, cast

from continuity import frames as fr
from continuity.paths import StoreLocation, describe_store, url_scheme
from continuity.registry import Registry, UnknownName
from continuity.store.base import BaseStore, Recovery

__all__ = ["STORE_SCHEMES", "StoreOpener", "open_store"]


class StoreOpener(Protocol):
    """What opens the stores of one URL scheme: called with the URL as given and
    :func:`open_store`'s keywords (``on_recovery`` too, which a backend without torn tails
    ignores), it returns the store, or raises :class:`~continuity.StoreNotFound` for a store
    that is missing when ``create`` is false."""

    def __call__(
        self,
        location: str,
        /,
        *,
        create: bool,
        durable: bool,
        on_recovery: Callable[[Recovery], None] | None,
        redactor: Callable[[fr.Frame], fr.Frame] | None,
        **options: Any,
    ) -> BaseStore: ...


def _opener(obj: object) -> StoreOpener:
    if not callable(obj):
        raise TypeError(f"a store scheme names {obj!r}, which is not a callable store opener")
    return cast(StoreOpener, obj)  # its signature is checked when it is called


STORE_SCHEMES: Registry[StoreOpener] = Registry(
    "store scheme",
    "continuity.stores",
    {
        "postgresql": "continuity.store.locate:_open_postgres",
        "postgres": "continuity.store.locate:_open_postgres",
    },
    key=str.lower,  # a URL's scheme is case-insensitive (RFC 3986)
    check=_opener,
)
"""The backends a store URL's scheme names (:class:`~continuity.registry.Registry`):
``STORE_SCHEMES.register("mystore", open_my_store)`` adds one at run time."""


def _open_postgres(
    location: str,
    /,
    *,
    create: bool,
    durable: bool,
    on_recovery: Callable[[Recovery], None] | None,
    redactor: Callable[[fr.Frame], fr.Frame] | None,
    **options: Any,
) -> BaseStore:
    del on_recovery  # a server's transactions leave no torn tail to recover
    from continuity.store.postgres import PostgresStore

    return PostgresStore(location, create=create, durable=durable, redactor=redactor, **options)


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
    server ``schema``, ``pool_size``, ``connect_timeout``). A URL whose scheme no backend opens
    is :class:`~continuity.registry.UnknownName`, naming the schemes there are."""
    scheme = url_scheme(location)
    if scheme is None:
        from continuity.store.jsonl import Store

        return Store(
            location,
            create=create,
            durable=durable,
            on_recovery=on_recovery,
            redactor=redactor,
            **options,
        )
    blocked: object = sys.modules.get("typing_extensions", False)
    if blocked is None:
        # The hook and search fast paths keep typing_extensions out of a process that does
        # not need it (continuity.__main__); psycopg does, and so may another backend.
        del sys.modules["typing_extensions"]
    url = str(location)
    try:
        opener = STORE_SCHEMES.get(scheme)
    except UnknownName as exc:
        raise UnknownName(
            f"{describe_store(url)}: {exc}; a folder store is named by its path, not a URL"
        ) from None
    store = opener(
        url, create=create, durable=durable, on_recovery=on_recovery, redactor=redactor, **options
    )
    if not isinstance(store, BaseStore):
        raise TypeError(f"the {scheme} store opener returned {type(store).__name__}, not a store")
    return store
