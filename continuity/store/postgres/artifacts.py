"""Artifacts in the PostgreSQL store: the ``artifacts`` table, one row per blob.

A row holds exactly the bytes the file store keeps in ``<ab>/<id>.zst``: a zstd frame, or a
delta against a base artifact (:data:`~continuity.store.artifacts.DELTA_MAGIC`), so the two
backends agree blob for blob and a migration can copy rows as files. The id is the blake3 of
the uncompressed bytes (a 32-byte key); every read decompresses and checks it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from continuity.store.artifacts import DELTA_MAGIC, CompressedArtifactStore, is_artifact_id
from continuity.store.base import now_ms

if TYPE_CHECKING:
    from continuity.store.postgres.db import Database

__all__ = ["PostgresArtifactStore"]


class PostgresArtifactStore(CompressedArtifactStore):
    """Content-addressed blobs in the ``artifacts`` table of a store's schema. Made by
    :class:`~continuity.store.postgres.PostgresStore` (``store.artifacts``), on its connections.
    Encoding, deltas and verification are the file store's (:class:`CompressedArtifactStore`);
    this class only keeps the blobs in rows."""

    def __init__(self, db: Database, *, durable: bool = True) -> None:
        super().__init__(durable=durable)
        self._db = db
        s = db.schema
        self._insert = (
            f"INSERT INTO {s}.artifacts (id, data, size, created_ms) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING"
        )
        self._select = f"SELECT data FROM {s}.artifacts WHERE id = %s"
        self._some = f"SELECT id, data FROM {s}.artifacts WHERE id = ANY(%s)"
        self._preloaded: dict[str, bytes] = {}
        self._exists = f"SELECT 1 FROM {s}.artifacts WHERE id = %s"
        self._head = f"SELECT substring(data FROM 1 FOR 5) FROM {s}.artifacts WHERE id = %s"
        self._ids = f"SELECT id FROM {s}.artifacts ORDER BY id"
        self._bytes = f"SELECT coalesce(sum(octet_length(data)), 0) FROM {s}.artifacts"
        self._delete = f"DELETE FROM {s}.artifacts WHERE id = %s"
        # A delta's header: magic (4 bytes), depth, the base's id (32 bytes).
        self._bases = (
            f"SELECT DISTINCT substring(data FROM 6 FOR 32) FROM {s}.artifacts "
            "WHERE substring(data FROM 1 FOR 4) = %s AND substring(data FROM 6 FOR 32) = ANY(%s)"
        )

    def preload(self, ids: Iterable[str]) -> None:
        """Read the blobs of ``ids`` in one query, each then served once by a later read
        instead of a query of its own (the search index reads every checkpoint's summary:
        one round trip each, ADR 0063). Blobs are named by their content: a preloaded one is
        the bytes a query would return. Those not read by :meth:`forget_preloaded` are
        dropped there."""
        wanted = sorted({a for a in ids if is_artifact_id(a)} - set(self._preloaded))
        if not wanted:
            return
        with self._db.connection() as conn:
            rows = conn.execute(self._some, [[bytes.fromhex(a) for a in wanted]], binary=True)
            for aid, data in rows.fetchall():
                self._preloaded[bytes(aid).hex()] = bytes(data)

    def forget_preloaded(self) -> None:
        self._preloaded.clear()

    def _read_blob(self, aid: str) -> bytes | None:
        blob = self._preloaded.pop(aid, None)
        if blob is not None:
            return blob
        with self._db.connection() as conn:
            row = conn.execute(self._select, [bytes.fromhex(aid)], binary=True).fetchone()
        return None if row is None else bytes(row[0])

    def _write_blob(self, aid: str, blob: bytes, size: int, *, durable: bool) -> None:
        with self._db.transaction(durable=durable) as conn:
            conn.execute(self._insert, [bytes.fromhex(aid), blob, size, now_ms()])

    def _blob_head(self, aid: str) -> bytes | None:
        with self._db.connection() as conn:
            row = conn.execute(self._head, [bytes.fromhex(aid)]).fetchone()
        return None if row is None else bytes(row[0])

    def exists(self, aid: str) -> bool:
        if not is_artifact_id(aid):
            return False
        with self._db.connection() as conn:
            return conn.execute(self._exists, [bytes.fromhex(aid)]).fetchone() is not None

    def delete(self, aid: str) -> bool:
        if not is_artifact_id(aid):
            return False
        with self._db.transaction(durable=True) as conn:
            return conn.execute(self._delete, [bytes.fromhex(aid)]).rowcount > 0

    def delta_bases(self, ids: Iterable[str]) -> set[str]:
        wanted = [bytes.fromhex(a) for a in ids if is_artifact_id(a)]
        if not wanted:
            return set()
        with self._db.connection() as conn:
            rows = conn.execute(self._bases, [DELTA_MAGIC, wanted], binary=True).fetchall()
        return {bytes(r[0]).hex() for r in rows}

    def ids(self) -> Iterator[str]:
        with self._db.connection() as conn:
            rows = conn.execute(self._ids, binary=True).fetchall()
        return iter([bytes(r[0]).hex() for r in rows])

    def stored_bytes(self) -> int:
        with self._db.connection() as conn:
            row = conn.execute(self._bytes).fetchone()
        return int(row[0]) if row is not None else 0
