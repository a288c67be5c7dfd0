"""Immutable, content-addressed blobs: summaries, compiled bundles, large tool outputs.

An artifact's id is the blake3 hex digest of its (uncompressed) bytes, so the same content always
gets the same id. On disk it is stored zstd-compressed at ``artifacts/<ab>/<id>.zst``, written to
a temporary file in the same folder, fsynced and renamed into place, and verified on every read.

A blob much like another one (the bundles of a thread's successive compiles share most of their
window) may be stored as a *delta*: zstd with the other blob's bytes as its dictionary, behind a
header naming that base (:data:`DELTA_MAGIC`, a depth byte, the base's 32-byte id). Reading one
reads its base (verified) first; chains are at most :data:`MAX_DELTA_DEPTH` long. The id is the
blob's own hash either way (ADR 0020).
"""

from __future__ import annotations

import _thread  # not threading: a hook process never needs to import it (0.5 ms)
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

import blake3

if TYPE_CHECKING:
    import zstandard

from continuity._fs import atomic_write, fsync_dir, private_dirs
from continuity.errors import ArtifactCorrupt, ArtifactNotFound

__all__ = [
    "DELTA_HEADER",
    "DELTA_MAGIC",
    "MAX_DELTA_DEPTH",
    "ArtifactStore",
    "CompressedArtifactStore",
    "FileArtifactStore",
    "MemoryArtifactStore",
    "artifact_id",
    "delta_base_of",
    "is_artifact_id",
]

_ID_RE: Final = re.compile(r"[0-9a-f]{64}")
_LEVEL: Final = 3
DELTA_MAGIC: Final = b"CTYD"
"""The first bytes of an artifact stored as a delta (a zstd frame starts with 28 b5 2f fd)."""
MAX_DELTA_DEPTH: Final = 8
"""The longest chain of deltas a read follows; a blob whose base is this deep is stored whole."""
_DELTA_HEADER: Final = len(DELTA_MAGIC) + 1 + 32
DELTA_HEADER: Final = _DELTA_HEADER
"""The bytes of a delta's header: magic, depth, the base's id."""


def delta_base_of(head: bytes) -> bytes | None:
    """The base id (32 bytes) a stored blob whose first bytes are ``head`` is a delta of;
    None when it is stored whole."""
    if len(head) >= _DELTA_HEADER and head.startswith(DELTA_MAGIC):
        return head[len(DELTA_MAGIC) + 1 : _DELTA_HEADER]
    return None


def artifact_id(data: bytes) -> str:
    """The content address of ``data``."""
    return blake3.blake3(data).hexdigest()


def is_artifact_id(value: str) -> bool:
    # fullmatch: `$` would also accept a trailing newline
    return _ID_RE.fullmatch(value) is not None


def _check_id(value: str) -> None:
    if not is_artifact_id(value):
        raise ArtifactNotFound(f"not an artifact id (64 lowercase hex characters): {value!r}")


class ArtifactStore(ABC):
    """Content-addressed blob storage. ``put`` is idempotent; ``get`` verifies."""

    @abstractmethod
    def put(self, data: bytes) -> str:
        """Store ``data`` (if not already there) and return its id."""

    @abstractmethod
    def get(self, aid: str) -> bytes:
        """The bytes stored under ``aid``; :class:`ArtifactNotFound` or :class:`ArtifactCorrupt`."""

    @abstractmethod
    def exists(self, aid: str) -> bool: ...

    @abstractmethod
    def ids(self) -> Iterator[str]:
        """Every stored id, sorted."""

    @abstractmethod
    def stored_bytes(self) -> int:
        """What the artifacts take where they are stored (compressed, on disk)."""

    def verify(self, aid: str) -> None:
        """Raise unless ``aid`` is stored and its bytes hash to it."""
        self.get(aid)

    def put_like(self, data: bytes, base: tuple[str, bytes] | None, *, durable: bool = True) -> str:
        """:meth:`put`, where ``base`` (an artifact's id and bytes, already stored) is much like
        ``data``: a store may keep ``data`` as a delta against it, and may skip the fsync when
        ``durable`` is false (a blob that can be derived again). This one stores it whole."""
        return self.put(data)

    def delete(self, aid: str) -> bool:
        """Remove ``aid`` (``continuity delete``: an artifact no remaining thread references);
        True if it was stored. Nothing else ever removes an artifact. A backend that cannot
        remove one raises NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} cannot remove artifacts")

    def delta_bases(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` that some stored artifact is a delta of (so removing them would
        break it): a store that keeps no deltas has none."""
        return set()


class MemoryArtifactStore(ArtifactStore):
    """The in-memory reference model."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        aid = artifact_id(data)
        self._blobs.setdefault(aid, bytes(data))
        return aid

    def delete(self, aid: str) -> bool:
        return self._blobs.pop(aid, None) is not None

    def get(self, aid: str) -> bytes:
        _check_id(aid)
        try:
            return self._blobs[aid]
        except KeyError:
            raise ArtifactNotFound(f"artifact {aid} not found") from None

    def exists(self, aid: str) -> bool:
        return aid in self._blobs

    def ids(self) -> Iterator[str]:
        return iter(sorted(self._blobs))

    def stored_bytes(self) -> int:
        return sum(len(b) for b in self._blobs.values())


class CompressedArtifactStore(ArtifactStore):
    """The stored form every persistent backend keeps, blob for blob: a zstd frame, or a delta
    against a base artifact (:data:`DELTA_MAGIC`, a depth byte, the base's id). This class
    encodes, decodes and verifies; a backend only says where a blob lives
    (:meth:`_read_blob`, :meth:`_write_blob`, :meth:`_blob_head`)."""

    def __init__(self, *, durable: bool = True) -> None:
        self.durable = durable
        # zstandard's (de)compressor objects are not thread-safe: one pair per thread.
        self._local = _thread._local()

    @abstractmethod
    def _read_blob(self, aid: str) -> bytes | None:
        """The stored blob of ``aid`` (a valid id), or None when there is none."""

    @abstractmethod
    def _write_blob(self, aid: str, blob: bytes, size: int, *, durable: bool) -> None:
        """Store ``blob`` (``size`` bytes uncompressed) under ``aid``; a blob already there
        stays (the same id is the same content)."""

    @abstractmethod
    def _blob_head(self, aid: str) -> bytes | None:
        """The first 5 bytes of the stored blob of ``aid``, or None when there is none."""

    def _codecs(self) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        codecs: tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor] | None = getattr(
            self._local, "codecs", None
        )
        if codecs is None:
            import zstandard  # on use: most hook runs never touch an artifact

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
        self._write_blob(aid, blob, len(data), durable=self.durable and durable)
        return aid

    def _depth(self, aid: str) -> int | None:
        """How many deltas deep the stored artifact ``aid`` is (0: whole); None if it is not
        stored."""
        head = self._blob_head(aid)
        if head is None:
            return None
        return head[len(DELTA_MAGIC)] if head.startswith(DELTA_MAGIC) and len(head) > 4 else 0

    def get(self, aid: str) -> bytes:
        return self._get(aid, 0)

    def _get(self, aid: str, depth: int) -> bytes:
        _check_id(aid)
        blob = self._read_blob(aid)
        if blob is None:
            raise ArtifactNotFound(f"artifact {aid} not found")
        import zstandard

        try:
            if blob.startswith(DELTA_MAGIC):
                data = self._undelta(aid, blob, depth)
            else:
                _check_declared_size(aid, blob)
                data = self._codecs()[1].decompress(blob)
        except zstandard.ZstdError as exc:
            raise ArtifactCorrupt(f"artifact {aid} does not decompress: {exc}") from None
        except MemoryError:
            # A damaged frame header can declare a size no buffer can hold.
            raise ArtifactCorrupt(f"artifact {aid} declares a size that cannot be read") from None
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
        _check_declared_size(aid, blob[_DELTA_HEADER:])
        out: bytes = zstandard.ZstdDecompressor(dict_data=ref).decompress(blob[_DELTA_HEADER:])
        return out


MAX_ARTIFACT_BYTES: Final = 1 << 31
"""No artifact is this large (2 GiB): a frame that declares more is damaged, and is not given a
buffer of that size."""


def _check_declared_size(aid: str, frame: bytes) -> None:
    import zstandard

    try:
        declared = zstandard.frame_content_size(frame)
    except zstandard.ZstdError as exc:
        raise ArtifactCorrupt(f"artifact {aid} does not decompress: {exc}") from None
    if declared > MAX_ARTIFACT_BYTES:
        raise ArtifactCorrupt(
            f"artifact {aid} declares {declared} bytes, more than any artifact holds"
        )


class FileArtifactStore(CompressedArtifactStore):
    """Artifacts as zstd files under ``root`` (``<root>/<ab>/<id>.zst``)."""

    def __init__(self, root: Path, *, durable: bool = True) -> None:
        super().__init__(durable=durable)
        self.root = root

    def path(self, aid: str) -> Path:
        return self.root / aid[:2] / f"{aid}.zst"

    def _read_blob(self, aid: str) -> bytes | None:
        try:
            return self.path(aid).read_bytes()
        except FileNotFoundError:
            return None

    def _write_blob(self, aid: str, blob: bytes, size: int, *, durable: bool) -> None:
        target = self.path(aid)
        private_dirs(target.parent)
        atomic_write(target, blob, durable=durable)

    def _blob_head(self, aid: str) -> bytes | None:
        try:
            with open(self.path(aid), "rb") as f:
                return f.read(len(DELTA_MAGIC) + 1)
        except FileNotFoundError:
            return None

    def exists(self, aid: str) -> bool:
        return is_artifact_id(aid) and self.path(aid).exists()

    def delete(self, aid: str) -> bool:
        if not is_artifact_id(aid):
            return False
        try:
            self.path(aid).unlink()
        except FileNotFoundError:
            return False
        fsync_dir(self.path(aid).parent)
        return True

    def delta_bases(self, ids: Iterable[str]) -> set[str]:
        wanted = {bytes.fromhex(a) for a in ids if is_artifact_id(a)}
        found: set[str] = set()
        if not wanted or not self.root.is_dir():
            return found
        for p in self.root.glob("*/*.zst"):
            try:
                with open(p, "rb") as f:
                    head = f.read(DELTA_HEADER)
            except OSError:
                continue
            base = delta_base_of(head)
            if base is not None and base in wanted:
                found.add(base.hex())
        return found

    def ids(self) -> Iterator[str]:
        if not self.root.is_dir():
            return iter(())
        found = [
            p.name[: -len(".zst")]
            for sub in self.root.iterdir()
            if sub.is_dir()
            for p in sub.iterdir()
            if p.name.endswith(".zst") and is_artifact_id(p.name[: -len(".zst")])
        ]
        return iter(sorted(found))

    def stored_bytes(self) -> int:
        if not self.root.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
