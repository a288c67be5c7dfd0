"""Fresh continuity stores for the child run, on the backend ``$CONTINUITY_UPSTREAM_BACKEND``.

``jsonl``: a folder under ``$CONTINUITY_UPSTREAM_TMP`` (made by the runner, removed after it).
``postgres``: a schema of its own on ``$CONTINUITY_UPSTREAM_PG_URL``, dropped when closed.
Stores are ``durable=False``: the suites test behaviour, not fsync.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
from pathlib import Path
from typing import Final
from uuid import uuid4

from continuity.store.base import BaseStore

BACKEND_ENV: Final = "CONTINUITY_UPSTREAM_BACKEND"
PG_URL_ENV: Final = "CONTINUITY_UPSTREAM_PG_URL"
TMP_ENV: Final = "CONTINUITY_UPSTREAM_TMP"
BACKENDS: Final = ("jsonl", "postgres")

_counter = itertools.count()
_counter_lock = threading.Lock()


def backend() -> str:
    """The backend this run is on (an unknown one is an error, not a silent default)."""
    name = os.environ.get(BACKEND_ENV, "jsonl")
    if name not in BACKENDS:
        raise ValueError(f"${BACKEND_ENV} is {name!r}: it must be one of {', '.join(BACKENDS)}")
    return name


def scratch() -> Path:
    """The run's scratch folder (the runner's, else one of this process's own)."""
    given = os.environ.get(TMP_ENV)
    if given:
        return Path(given)
    made = Path(tempfile.mkdtemp(prefix="continuity-upstream-"))
    os.environ[TMP_ENV] = str(made)
    return made


def _fresh_name(tag: str) -> str:
    with _counter_lock:
        n = next(_counter)
    safe = "".join(c if c.isalnum() else "_" for c in tag.lower())[:24]
    return f"{safe}_{os.getpid()}_{n}_{uuid4().hex[:8]}"


class FreshStore:
    """A new, empty store for one test (or one ``:memory:`` session), closed by :meth:`close`."""

    def __init__(self, tag: str, *, key: str | None = None) -> None:
        """``key`` names the store: the same key is the same store (a file a test reopens);
        without one the store is new."""
        name = _fresh_name(tag) if key is None else "k_" + _digest(key)
        self.schema: str | None = None
        self.store: BaseStore
        if backend() == "postgres":
            from continuity.store.postgres import PostgresStore

            url = os.environ.get(PG_URL_ENV)
            if not url:
                raise RuntimeError(f"the postgres backend needs ${PG_URL_ENV}")
            self.schema = "up_" + name if len(name) < 50 else "up_" + _digest(name)
            self.store = PostgresStore(url, schema=self.schema, create=True, durable=False)
        else:
            from continuity.store.jsonl import Store

            self.store = Store(scratch() / name, create=True, durable=False)

    def close(self, *, drop: bool = True) -> None:
        self.store.close()
        if drop and self.schema is not None:
            import psycopg

            with psycopg.connect(os.environ[PG_URL_ENV], autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:24]
