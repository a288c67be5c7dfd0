"""Documents: what of a frame is searchable, as a weighted bag of terms (:class:`Doc`).

A document is a message, an observation, a checkpoint's summary or a note an agent recorded
(a ``record_appended`` of kind ``continuity.note`` or ``continuity.decision``, whose data holds
its ``text``): what the conversation said. Any other ``record_appended`` frame is a runtime's
own state and a ``messages_retracted`` frame a mark on other frames: neither is a document.
Field weights: commands and file paths count four times, tool names three, prose and notes two,
tool output one (given whole, as text parts, or as the preview of an artifact), thinking and
what a provider block says (its ``text``: a server tool's call or result, a document, a
reasoning summary) one. Each field is cut at 4,000 characters.

Every index makes its documents here — a thread's (:mod:`.index`), the store's
(:mod:`.store_index`), the vectors (:mod:`.vectors`) and a backend's own tables (handed
:func:`documents_of_lines` through :meth:`~continuity.store.base.BaseStore.search_backend`) — so
they all hold the same documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.errors import ArtifactCorrupt, ArtifactNotFound
from continuity.retrieval.terms import term_counts
from continuity.store.base import BaseStore, Thread

__all__ = [
    "DOC_TYPES",
    "KIND_MESSAGE",
    "KIND_NAMES",
    "KIND_NOTE",
    "KIND_OBSERVATION",
    "KIND_SUMMARY",
    "NOTE_KINDS",
    "ROLE_NAMES",
    "Doc",
    "doc_of",
    "doc_of_line",
    "docs_of",
    "documents_of_lines",
    "frame_text",
    "may_be_document",
    "note_text",
    "summary_text",
    "text_of",
]

KIND_MESSAGE: Final = 1
KIND_OBSERVATION: Final = 2
KIND_SUMMARY: Final = 3
KIND_NOTE: Final = 4
KIND_NAMES: Final = {
    KIND_MESSAGE: "message",
    KIND_OBSERVATION: "observation",
    KIND_SUMMARY: "summary",
    KIND_NOTE: "note",
}
NOTE_KINDS: Final = ("continuity.note", "continuity.decision")
"""The record kinds an agent's own notes are written with (the MCP ``remember`` tool): searched
like what the conversation said."""
_ROLES: Final = {"user": 1, "assistant": 2, "system": 3}
ROLE_NAMES: Final = {v: k for k, v in _ROLES.items()}

_MAX_FIELD_CHARS: Final = 4000


class Doc(msgspec.Struct, array_like=True):
    """A searchable unit: a message, an observation or a summary, as weighted term counts."""

    seq: int
    kind: int
    role: int
    length: int
    tf: dict[str, int]


_PATH_KEYS: Final = ("file_path", "path", "notebook_path", "filePath", "pattern", "glob")
_COMMAND_KEYS: Final = ("command", "cmd", "script")


def _fields(frame: fr.Frame, summary: str | None) -> Iterator[tuple[str, int]]:
    """(text, weight) pairs of what a frame says."""
    if isinstance(frame, fr.MessageAppended):
        for b in frame.content:
            if isinstance(b, fr.TextBlock):
                yield b.text, 2
            elif isinstance(b, fr.ThinkingBlock):
                yield b.text, 1
            elif isinstance(b, fr.ToolUseBlock):
                yield b.name, 3
                for key, value in b.input.items():
                    if isinstance(value, str):
                        weight = 4 if key in _PATH_KEYS or key in _COMMAND_KEYS else 2
                        yield value, weight
            elif isinstance(b, fr.ToolResultBlock):
                yield b.text, 1  # content, its text parts, or an artifact's preview
            elif isinstance(b, fr.ProviderBlock):
                yield b.text, 1
    elif isinstance(frame, fr.ObservationRecorded):
        yield frame.text, 2
    elif isinstance(frame, fr.RecordAppended):
        yield note_text(frame), 2
    elif summary is not None:
        yield summary, 1


def doc_of(frame: fr.Frame, summary: str | None = None) -> Doc | None:
    """The document of a frame (None for frames that say nothing searchable, and for frames
    that are not conversation: records, retractions, decisions, jobs)."""
    if isinstance(frame, fr.MessageAppended):
        kind, role = KIND_MESSAGE, _ROLES.get(frame.role, 0)
    elif isinstance(frame, fr.ObservationRecorded):
        kind, role = KIND_OBSERVATION, 0
    elif isinstance(frame, fr.CompactionCheckpointCreated) and summary is not None:
        kind, role = KIND_SUMMARY, 0
    elif isinstance(frame, fr.RecordAppended) and frame.kind in NOTE_KINDS:
        kind, role = KIND_NOTE, 0
    else:
        return None
    # A token's count is the sum of the weights of its occurrences.
    tf = term_counts((text[:_MAX_FIELD_CHARS], w) for text, w in _fields(frame, summary))
    if not tf:
        return None
    return Doc(frame.seq, kind, role, sum(tf.values()), {t: tf[t] for t in sorted(tf)})


def note_text(frame: fr.RecordAppended) -> str:
    """The text of an agent's note (a record of one of :data:`NOTE_KINDS`; "" for any other
    record, or a note whose data is not ``{"text": ...}``)."""
    data = frame.data
    if frame.kind not in NOTE_KINDS or not isinstance(data, dict):
        return ""
    text = data.get("text")
    return text if isinstance(text, str) else ""


def summary_text(store: BaseStore, frame: fr.Frame) -> str | None:
    """The text of a checkpoint's summary (None for other frames or an unreadable artifact)."""
    if not isinstance(frame, fr.CompactionCheckpointCreated):
        return None
    from continuity.summary import decode_summary, provider_block, provider_summary_text

    try:
        data = store.artifacts.get(frame.summary_artifact_id)
    except (ArtifactNotFound, ArtifactCorrupt):
        return None
    block = provider_block(frame.summary_kind, data)
    if block is not None:  # a provider's compaction: its readable summary, never its bytes
        return provider_summary_text(block)
    try:
        return decode_summary(data).text
    except (msgspec.DecodeError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")


def frame_text(frame: fr.Frame, store: BaseStore) -> str:
    """What a frame says, as one line of text (the fields the index tokenizes)."""
    return text_of(frame, summary_text(store, frame))


def text_of(frame: fr.Frame, summary: str | None) -> str:
    """:func:`frame_text` for a caller that has read the checkpoint's summary already."""
    return " ".join(" ".join(t.split()) for t, _w in _fields(frame, summary))


def docs_of(frames: Iterable[fr.Frame], store: BaseStore) -> Iterator[Doc]:
    """The documents of ``frames`` as the index makes them (the scan path's reference)."""
    for f in frames:
        d = doc_of(f, summary_text(store, f))
        if d is not None:
            yield d


DOC_TYPES: Final = tuple(
    f'{{"type":"{kind.__struct_config__.tag}"'.encode()
    for kind in (fr.MessageAppended, fr.ObservationRecorded, fr.CompactionCheckpointCreated)
)
"""How the stored lines of the frames that can be documents start: the others (decisions,
jobs, records…) are not decoded, but for a record line that names a note kind."""
_RECORD_LINE: Final = b'{"type":"record_appended"'
_NOTE_MARKS: Final = tuple(f'"kind":"{k}"'.encode() for k in NOTE_KINDS)


def may_be_document(line: bytes) -> bool:
    """Whether a stored line may make a document (False: it surely does not; not decoded)."""
    return (
        line.startswith(DOC_TYPES)
        or not line.startswith(b'{"type":"')
        or (line.startswith(_RECORD_LINE) and any(m in line for m in _NOTE_MARKS))
    )


def doc_of_line(thread: Thread, seq: int, line: bytes) -> Doc | None:
    """The document of one stored line of ``thread`` (None for a frame that makes none); a line
    that cannot be a document is not decoded."""
    if may_be_document(line):
        frame = thread.decode(seq, line)
        return doc_of(frame, summary_text(thread.store, frame))
    return None


def documents_of_lines(thread: Thread, lines: Sequence[tuple[int, bytes]]) -> list[Doc]:
    """The documents of ``thread``'s stored lines ((seq, line) pairs, in log order): what a
    backend that keeps its own search index (:meth:`BaseStore.search_backend`) is given to
    index with, so that it makes the documents this module makes."""
    return [d for seq, line in lines if (d := doc_of_line(thread, seq, line)) is not None]
