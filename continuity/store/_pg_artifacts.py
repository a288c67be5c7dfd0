"""Artifacts in the PostgreSQL store: the ``artifacts`` table, one row per blob.

A row holds exactly the bytes the file store keeps in ``<ab>/<id>.zst``: a zstd frame, or a
delta against a base artifact (:data:`~continuity.store.artifacts.DELTA_MAGIC`), so the two
backends agree blob for blob and a migration can copy rows as files. The id is the blake3 of
the uncompressed bytes (a 32-byte key); every read decompresses and checks it.
"""

from __future__ import annotations

import _thread
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from continuity.errors import ArtifactCorrupt, ArtifactNotFound
from continuity.store.artifacts import (
    DELTA_MAGIC,
    MAX_DELTA_DEPTH,
    ArtifactStore,
    artifact_id,
    is_artifact_id,
)
from continuity.store.base import now_ms

if TYPE_CHECKING:
    import zstandard

    from continuity.store._pg_db import Database

__all__ = ["PostgresArtifactStore"]

_LEVEL: Final = 3
_DELTA_HEADER: Final = len(DELTA_MAGIC) + 1 + 32


def _key(aid: str) -> bytes:
    if not is_artifact_id(aid):
        raise ArtifactNotFound(f"not an artifact id (64 lowercase hex characters): {aid!r}")
    return bytes.fromhex(aid)


class PostgresArtifactStore(ArtifactStore):
    """Content-addressed blobs in the ``artifacts`` table of a store's schema. Made by
    :class:`~continuity.store.postgres.PostgresStore` (``store.artifacts``), on its connections."""

    def __init__(self, db: Database, *, durable: bool = True) -> None:
        self._db = db
        self.durable = durable
        s = db.schema
        self._insert = (
            f"INSERT INTO {s}.artifacts (id, data, size, created_ms) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING"
        )
        self._select = f"SELECT data FROM {s}.artifacts WHERE id = %s"
        self._exists = f"SELECT 1 FROM {s}.artifacts WHERE id = %s"
        self._head = f"SELECT substring(data FROM 1 FOR 5) FROM {s}.artifacts WHERE id = %s"
        self._ids = f"SELECT id FROM {s}.artifacts ORDER BY id"
        self._bytes = f"SELECT coalesce(sum(octet_length(data)), 0) FROM {s}.artifacts"
        # zstandard's (de)compressor objects are not thread-safe: one pair per thread.
        self._local = _thread._local()

    def _codecs(self) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        codecs: tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor] | None = getattr(
            self._local, "codecs", None
        )
        if codecs is None:
            import zstandard

            codecs = (zstandard.ZstdCompressor(level=_LEVEL), zstandard.ZstdDecompressor())
            self._local.codecs = codecs
        return codecs

    def put(self, data: bytes) -> str:
        return self.put_like(data, None)

    def put_like(self, data: bytes, base: tuple[str, bytes] | None, *, durable: bool = True) -> str:
        data = bytes(data)
        aid = artifact_id(data)
        if self.exists(aid):  # the common repeat: no compression, no write
            return aid
        blob = None
        if base is not None and is_artifact_id(base[0]) and base[0] != aid:
            depth = self._depth(base[0])
            if depth is not None and depth < MAX_DELTA_DEPTH:
                import zstandard

                ref = zstandard.ZstdCompressionDict(
                    base[1], dict_type=zstandard.DICT_TYPE_RAWCONTENT
                )
                delta = zstandard.ZstdCompressor(level=_LEVEL, dict_data=ref).compress(data)
                blob = DELTA_MAGIC + bytes([depth + 1]) + bytes.fromhex(base[0]) + delta
        if blob is None:
            blob = self._codecs()[0].compress(data)
        with self._db.transaction(durable=self.durable and durable) as conn:
            conn.execute(self._insert, [bytes.fromhex(aid), blob, len(data), now_ms()])
        return aid

    def _depth(self, aid: str) -> int | None:
        """How many deltas deep the stored artifact ``aid`` is (0: whole); None if not stored."""
        with self._db.connection() as conn:
            row = conn.execute(self._head, [bytes.fromhex(aid)]).fetchone()
        if row is None:
            return None
        head = bytes(row[0])
        return head[len(DELTA_MAGIC)] if head.startswith(DELTA_MAGIC) and len(head) > 4 else 0

    def get(self, aid: str) -> bytes:
        return self._get(aid, 0)

    def _get(self, aid: str, depth: int) -> bytes:
        key = _key(aid)
        with self._db.connection() as conn:
            row = conn.execute(self._select, [key], binary=True).fetchone()
        if row is None:
            raise ArtifactNotFound(f"artifact {aid} not found")
        blob = bytes(row[0])
        import zstandard

        try:
            if blob.startswith(DELTA_MAGIC):
                data = self._undelta(aid, blob, depth)
            else:
                data = self._codecs()[1].decompress(blob)
        except zstandard.ZstdError as exc:
            raise ArtifactCorrupt(f"artifact {aid} does not decompress: {exc}") from None
        if artifact_id(data) != aid:
            raise ArtifactCorrupt(f"artifact {aid} does not match its content hash")
        return data

    def _undelta(self, aid: str, blob: bytes, depth: int) -> bytes:
        import zstandard

        if len(blob) < _DELTA_HEADER or depth >= MAX_DELTA_DEPTH:
            raise ArtifactCorrupt(f"artifact {aid} is a delta with a bad header or chain")
        base_id = blob[len(DELTA_MAGIC) + 1 : _DELTA_HEADER].hex()
        try:
            base = self._get(base_id, depth + 1)
        except ArtifactNotFound:
            raise ArtifactCorrupt(
                f"artifact {aid} is a delta of {base_id}, which is missing"
            ) from None
        ref = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        out: bytes = zstandard.ZstdDecompressor(dict_data=ref).decompress(blob[_DELTA_HEADER:])
        return out

    def exists(self, aid: str) -> bool:
        if not is_artifact_id(aid):
            return False
        with self._db.connection() as conn:
            return conn.execute(self._exists, [bytes.fromhex(aid)]).fetchone() is not None

    def ids(self) -> Iterator[str]:
        with self._db.connection() as conn:
            rows = conn.execute(self._ids, binary=True).fetchall()
        return iter([bytes(r[0]).hex() for r in rows])

    def stored_bytes(self) -> int:
        with self._db.connection() as conn:
            row = conn.execute(self._bytes).fetchone()
        return int(row[0]) if row is not None else 0
