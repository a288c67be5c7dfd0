"""The frame schema: one tagged union of frozen msgspec Structs, and the chained line codec.

A log line is the frame's canonical JSON (``type`` first, fields in definition order, defaults
omitted) with ``"digest"`` spliced in as the last member::

    {"type":"message_appended","seq":1,"ts_ms":1732240000123,...,"digest":"<64 hex>"}

The digest is ``blake3(previous digest || body)``, where *body* is the line without its digest
member (exactly the bytes the encoder produced). Because the digest always sits at a fixed
distance from the end of the line, the chain is verified on the stored bytes alone: no frame is
ever re-encoded to be checked, so logs written by older versions of the schema keep verifying.

Schema evolution rules (``contracts/event_frames.md``): new fields go at the end with a default,
a field's type and default never change, a breaking change gets a new tag.
"""

from __future__ import annotations

import os
from binascii import hexlify
from typing import Any, Final, Literal, TypeAlias

import blake3
import msgspec

from continuity.errors import BadFrame
from continuity.tokens import estimate_text

__all__ = [
    "DIGEST_HEX_LEN",
    "GENESIS_DIGEST",
    "SEAL_SUFFIX_LEN",
    "Block",
    "CheckpointRef",
    "CompactionCheckpointCreated",
    "ContentBlock",
    "ContextSelectionDecided",
    "ContextSelectionRepeated",
    "Envelope",
    "ForkPoint",
    "Frame",
    "FrameBase",
    "ImageBlock",
    "JobEnded",
    "JobSpawned",
    "Limits",
    "MessageAppended",
    "MessagesRetracted",
    "ObservationRecorded",
    "ProviderBlock",
    "RecallRef",
    "RecordAppended",
    "Role",
    "SeqSpan",
    "SourceRef",
    "TextBlock",
    "ThinkingBlock",
    "ThreadCreated",
    "ToolResultBlock",
    "ToolUseBlock",
    "artifact_refs",
    "chain",
    "checked_body",
    "content_blocks",
    "decode_frame",
    "encode_body",
    "envelope",
    "estimate_message_tokens",
    "frame_types",
    "message",
    "new_id",
    "normalize",
    "parse_payload",
    "seal",
    "stored_digest",
    "unseal",
]

Role: TypeAlias = Literal["user", "assistant", "system"]
_ROLES: Final = ("user", "assistant", "system")


class _Struct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


# --- content blocks -------------------------------------------------------------------------


class Block(_Struct, frozen=True, tag_field="type"):
    """Base of the content blocks of a message. A block checks the types of its fields when
    it is made (:class:`BadFrame` naming the field), so a wrong argument fails where it is
    given, not later at append."""


def _need(block: str, field: str, value: object, types: type | tuple[type, ...]) -> None:
    """Raise :class:`BadFrame` unless ``value`` (the ``field`` of a ``block``) is one of
    ``types`` (an exact check: a bool is not an int here)."""
    if type(value) in (types if isinstance(types, tuple) else (types,)):
        return
    wanted = types if isinstance(types, tuple) else (types,)
    names = " or ".join("None" if t is type(None) else t.__name__ for t in wanted)
    hint = ""
    if isinstance(value, dict) and "type" in value:
        hint = " (a provider dict: convert it with continuity.from_anthropic / from_openai)"
    elif isinstance(value, list) and str in wanted:
        hint = " (a list of blocks goes in `parts` / `content=`)"
    raise BadFrame(f"{block}.{field} must be {names}, not {type(value).__name__}{hint}")


_OPT_STR: Final = (str, type(None))


class TextBlock(Block, frozen=True, kw_only=True, tag="text"):
    text: str

    def __post_init__(self) -> None:
        if type(self.text) is not str:
            _need("TextBlock", "text", self.text, str)


class ThinkingBlock(Block, frozen=True, kw_only=True, tag="thinking"):
    """A model's reasoning. ``signature`` is the provider's seal on it (Anthropic sends a signed
    block back unchanged while its turn is in a tool loop); ``data`` is the encrypted content
    of redacted thinking (Anthropic ``redacted_thinking``), whose ``text`` is then empty."""

    text: str
    signature: str | None = None
    data: str | None = None

    def __post_init__(self) -> None:
        # one expression on the way (decoding calls this too), the messages only on a miss
        if not (
            type(self.text) is str
            and (self.signature is None or type(self.signature) is str)
            and (self.data is None or type(self.data) is str)
        ):
            _need("ThinkingBlock", "text", self.text, str)
            _need("ThinkingBlock", "signature", self.signature, _OPT_STR)
            _need("ThinkingBlock", "data", self.data, _OPT_STR)


class ToolUseBlock(Block, frozen=True, kw_only=True, tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any] = {}

    def __post_init__(self) -> None:
        if not (type(self.id) is str and type(self.name) is str and type(self.input) is dict):
            _need("ToolUseBlock", "id", self.id, str)
            _need("ToolUseBlock", "name", self.name, str)
            _need("ToolUseBlock", "input", self.input, dict)


class ImageBlock(Block, frozen=True, kw_only=True, tag="image"):
    """An image: its bytes in the artifact ``artifact_id`` (``size`` bytes), or at ``url``."""

    media_type: str
    artifact_id: str | None = None
    size: int = 0
    url: str | None = None

    def __post_init__(self) -> None:
        if not (
            type(self.media_type) is str
            and type(self.size) is int
            and (self.artifact_id is None or type(self.artifact_id) is str)
            and (self.url is None or type(self.url) is str)
        ):
            _need("ImageBlock", "media_type", self.media_type, str)
            _need("ImageBlock", "artifact_id", self.artifact_id, _OPT_STR)
            _need("ImageBlock", "size", self.size, int)
            _need("ImageBlock", "url", self.url, _OPT_STR)


class ToolResultBlock(Block, frozen=True, kw_only=True, tag="tool_result"):
    """One tool's output. ``content`` holds it whole as text; or ``parts`` holds it as blocks
    (text and images, as Anthropic allows); or it lives in the artifact ``artifact_id`` and
    ``preview`` holds its beginning. ``size`` is the whole output's length in UTF-8 bytes."""

    tool_use_id: str
    content: str = ""
    artifact_id: str | None = None
    preview: str = ""
    size: int = 0
    is_error: bool = False
    parts: list[TextBlock | ImageBlock] = []

    def __post_init__(self) -> None:
        if not (
            type(self.tool_use_id) is str
            and type(self.content) is str
            and type(self.preview) is str
            and type(self.size) is int
            and type(self.is_error) is bool
            and (self.artifact_id is None or type(self.artifact_id) is str)
            and type(self.parts) is list
            and (not self.parts or all(type(p) in _PART_TYPES for p in self.parts))
        ):
            self._name_the_field()
        if (self.content and (self.artifact_id is not None or self.parts)) or (
            self.parts and self.artifact_id is not None
        ):
            raise ValueError(
                "a tool_result holds its output in `content`, in `parts` or in `artifact_id`, "
                "not in two of them"
            )

    def _name_the_field(self) -> None:
        _need("ToolResultBlock", "tool_use_id", self.tool_use_id, str)
        _need("ToolResultBlock", "content", self.content, str)
        _need("ToolResultBlock", "artifact_id", self.artifact_id, _OPT_STR)
        _need("ToolResultBlock", "preview", self.preview, str)
        _need("ToolResultBlock", "size", self.size, int)
        _need("ToolResultBlock", "is_error", self.is_error, bool)
        _need("ToolResultBlock", "parts", self.parts, list)
        for i, p in enumerate(self.parts):
            _need("ToolResultBlock", f"parts[{i}]", p, (TextBlock, ImageBlock))

    @property
    def text(self) -> str:
        """The output's text as far as this block holds it (the preview of one in an
        artifact; the text parts of one given as blocks): a string, as every block's ``text``
        is, so code that reads ``block.text`` of any block reads a tool result too. Not a
        field: it is not stored."""
        if self.artifact_id is not None:
            return self.preview
        if self.parts:
            return "\n".join(p.text for p in self.parts if isinstance(p, TextBlock))
        return self.content


_PART_TYPES: Final = (TextBlock, ImageBlock)


class ProviderBlock(Block, frozen=True, kw_only=True, tag="provider"):
    """A block of a provider's own that has no type here (a server tool call and its result,
    a document, an OpenAI reasoning item, …), kept whole so it can be sent back to the
    provider it came from. ``kind`` is the provider's type name, ``data`` the block as the
    provider wrote it, ``text`` what it says (for search and for other providers)."""

    provider: str
    kind: str
    data: dict[str, Any]
    text: str = ""

    def __post_init__(self) -> None:
        if not (
            type(self.provider) is str
            and type(self.kind) is str
            and type(self.data) is dict
            and type(self.text) is str
        ):
            _need("ProviderBlock", "provider", self.provider, str)
            _need("ProviderBlock", "kind", self.kind, str)
            _need("ProviderBlock", "data", self.data, dict)
            _need("ProviderBlock", "text", self.text, str)


ContentBlock: TypeAlias = (
    TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock | ImageBlock | ProviderBlock
)


class SourceRef(_Struct, frozen=True, kw_only=True):
    """Where an imported frame came from, so a re-import can skip what it already holds."""

    system: str
    key: str


class RecallRef(_Struct, frozen=True, kw_only=True):
    """One search hit the recall stage of a compile considered."""

    seq: int
    score: float
    included: bool = False


class CheckpointRef(_Struct, frozen=True, kw_only=True):
    """A compaction checkpoint as a selection decision names it."""

    checkpoint_id: str
    seq: int
    to_seq: int
    summary_kind: str
    summary_artifact_id: str


class Limits(_Struct, frozen=True, kw_only=True):
    """The limits a compile ran with. ``min_recent`` keeps at least that many raw messages in
    the window even when a summary already covers them (right after a compaction)."""

    recent_messages: int = 16
    max_summary_refs: int = 3
    budget_tokens: int | None = None
    keep_tool_outputs: int | None = None
    recall_budget_tokens: int | None = None
    min_recent: int = 0


class SeqSpan(_Struct, frozen=True, kw_only=True):
    """The seqs ``from_seq`` to ``to_seq`` of a thread, both included."""

    from_seq: int
    to_seq: int


class ForkPoint(_Struct, frozen=True, kw_only=True):
    """Where a forked thread comes from: frames 1 to ``seq`` of ``thread_id`` (whose frame
    ``seq`` carries ``digest``) are copied into the fork, at the same seqs."""

    thread_id: str
    seq: int
    digest: str


# --- frames ---------------------------------------------------------------------------------


class FrameBase(_Struct, frozen=True, tag_field="type"):
    """The envelope every frame carries.

    ``seq`` and ``digest`` are assigned by the store; ``ts_ms`` too unless the caller gives one
    (an import keeps the source's time). ``more`` is true on every frame of a batch but its last,
    so a batch cut short by a crash is recognised and removed whole.
    """

    seq: int = -1
    ts_ms: int = 0
    more: bool = False
    digest: str = ""


class ThreadCreated(FrameBase, frozen=True, kw_only=True, tag="thread_created"):
    thread_id: str = ""
    title: str | None = None
    parent_thread_id: str | None = None
    meta: dict[str, str] = {}
    fork_of: ForkPoint | None = None


class MessageAppended(FrameBase, frozen=True, kw_only=True, tag="message_appended"):
    message_id: str = ""
    role: Role
    content: list[ContentBlock]
    tokens: int = 0
    source: SourceRef | None = None
    meta: dict[str, str] = {}


class CompactionCheckpointCreated(
    FrameBase, frozen=True, kw_only=True, tag="compaction_checkpoint_created"
):
    checkpoint_id: str
    cut_rule_id: str
    summary_kind: str
    summary_artifact_id: str
    from_seq: int
    to_seq: int
    from_message_id: str | None = None
    to_message_id: str | None = None
    base_checkpoint_id: str | None = None
    produced_by: str = "continuity"


class ContextSelectionDecided(
    FrameBase, frozen=True, kw_only=True, tag="context_selection_decided"
):
    compiler_id: str
    strategy: str
    anchor_seq: int
    anchor_message_id: str | None = None
    limits: Limits = Limits()
    checkpoint: CheckpointRef | None = None
    checkpoints: list[CheckpointRef] = []
    window_from_seq: int | None = None
    window_to_seq: int | None = None
    window_messages: int = 0
    reasons: list[str] = []
    resets: list[str] = []
    bundle_artifact_id: str
    tokens: int = 0
    recall_query: str | None = None
    recall_hits: list[RecallRef] = []


class ObservationRecorded(FrameBase, frozen=True, kw_only=True, tag="observation_recorded"):
    """A short text that stands for one tool result when the result itself is too old to show."""

    tool_use_id: str
    text: str
    source_seq: int | None = None
    produced_by: str = "continuity"


class JobSpawned(FrameBase, frozen=True, kw_only=True, tag="job_spawned"):
    job_id: str
    kind: str
    params: dict[str, Any] = {}


class JobEnded(FrameBase, frozen=True, kw_only=True, tag="job_ended"):
    job_id: str
    status: Literal["succeeded", "failed", "cancelled"]
    error: str | None = None
    result: dict[str, Any] = {}


class MessagesRetracted(FrameBase, frozen=True, kw_only=True, tag="messages_retracted"):
    """The messages in ``spans`` are no longer part of the conversation from this frame on
    (the log keeps them: compile, the renderers and recall leave them out; ``log`` and search
    show them as retracted). ``message_ids`` are the ids the caller named, ``reason`` why."""

    spans: list[SeqSpan]
    reason: str = ""
    message_ids: list[str] = []


class RecordAppended(FrameBase, frozen=True, kw_only=True, tag="record_appended"):
    """A runtime's own record: ``kind`` is namespaced (``"langgraph.checkpoint"``), ``key``
    tells records of one kind apart. The record is ``data`` (a small JSON value) or the
    artifact ``artifact_id`` (``size`` bytes) for large state."""

    kind: str
    key: str = ""
    data: Any = None
    artifact_id: str | None = None
    size: int = 0


class ContextSelectionRepeated(
    FrameBase, frozen=True, kw_only=True, tag="context_selection_repeated"
):
    """A compile that chose exactly what the decision at ``decision_seq`` chose (the same
    anchor, limits, recall query and bundle): the selection stays on record without a second
    full decision (ADR 0020)."""

    decision_seq: int
    bundle_artifact_id: str


Frame: TypeAlias = (
    ThreadCreated
    | MessageAppended
    | CompactionCheckpointCreated
    | ContextSelectionDecided
    | ObservationRecorded
    | JobSpawned
    | JobEnded
    | MessagesRetracted
    | RecordAppended
    | ContextSelectionRepeated
)

_FRAME_CLASSES: Final = (
    ThreadCreated,
    MessageAppended,
    CompactionCheckpointCreated,
    ContextSelectionDecided,
    ObservationRecorded,
    JobSpawned,
    JobEnded,
    MessagesRetracted,
    RecordAppended,
    ContextSelectionRepeated,
)


def frame_types() -> tuple[str, ...]:
    """Every frame tag, in schema order."""
    return tuple(str(c.__struct_config__.tag) for c in _FRAME_CLASSES)


# --- the chained line codec -----------------------------------------------------------------

DIGEST_HEX_LEN: Final = 64
GENESIS_DIGEST: Final = bytes(32)
_DIGEST_OPEN: Final = b',"digest":"'
_DIGEST_CLOSE: Final = b'"}'
_SUFFIX_LEN: Final = len(_DIGEST_OPEN) + DIGEST_HEX_LEN + len(_DIGEST_CLOSE)
SEAL_SUFFIX_LEN: Final = _SUFFIX_LEN
"""How many bytes the digest member takes at the end of a stored line."""

_encoder: Final = msgspec.json.Encoder()
_decoder: Final[msgspec.json.Decoder[Frame]] = msgspec.json.Decoder(Frame)


def encode_body(frame: Frame) -> bytes:
    """The canonical bytes of a frame without its digest (the frame's ``digest`` must be empty)."""
    return _encoder.encode(frame)


def checked_body(frame: Frame, index: int = 0) -> bytes:
    """:func:`encode_body`, refusing a frame a reader would not decode back.

    Structs are not validated when they are built (``message("tool", "x")`` or
    ``ToolUseBlock(input="ls")`` construct fine), so the body is decoded again here: a frame that
    does not survive the round trip raises :class:`BadFrame` naming the field, before it can be
    sealed into the log. ``index`` is the frame's place in its batch, for the message.
    """
    try:
        body = _encoder.encode(frame)
        _decoder.decode(body)
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError, OverflowError) as exc:
        tag = getattr(getattr(frame, "__struct_config__", None), "tag", type(frame).__name__)
        raise BadFrame(f"frame {index} of the batch ({tag}) is invalid: {exc}") from None
    return body


def chain(prev_digest: bytes, body: bytes) -> bytes:
    """The next link of the chain: ``blake3(prev_digest || body)``, 32 bytes."""
    return blake3.blake3(prev_digest + body).digest()


def seal(body: bytes, digest: bytes) -> bytes:
    """A log line (with its newline) from a body and its chain digest."""
    return b"".join((body[:-1], _DIGEST_OPEN, hexlify(digest), b'"}\n'))


def unseal(line: bytes) -> tuple[bytes, bytes] | None:
    """Split a stored line (no newline) into (body, digest); None if it has no digest suffix."""
    n = len(line)
    if n <= _SUFFIX_LEN or not line.endswith(_DIGEST_CLOSE):
        return None
    start = n - _SUFFIX_LEN
    if line[start : start + len(_DIGEST_OPEN)] != _DIGEST_OPEN:
        return None
    hex_digest = line[start + len(_DIGEST_OPEN) : n - len(_DIGEST_CLOSE)]
    try:
        digest = bytes.fromhex(hex_digest.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    # fromhex also takes upper case and spaces: only the form `seal` writes is a sealed line,
    # or the stored digest text could change without the chain noticing.
    if hexlify(digest) != hex_digest:
        return None
    return line[:start] + b"}", digest


def stored_digest(line_end: bytes) -> bytes | None:
    """The digest a stored line carries, from the line's last bytes alone (at least
    :data:`SEAL_SUFFIX_LEN` of them, without the newline); None if they are not a seal's.

    A read that starts at frame N checks N against N-1's stored digest: this reads that digest
    without reading N-1's body, however long it is."""
    if len(line_end) < _SUFFIX_LEN:
        return None
    tail = line_end[-_SUFFIX_LEN:]
    if not tail.startswith(_DIGEST_OPEN) or not tail.endswith(_DIGEST_CLOSE):
        return None
    hex_digest = tail[len(_DIGEST_OPEN) : -len(_DIGEST_CLOSE)]
    try:
        digest = bytes.fromhex(hex_digest.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return digest if hexlify(digest) == hex_digest else None


class Envelope(msgspec.Struct):
    """The two envelope fields a reader needs without decoding a whole frame."""

    seq: int = -1
    more: bool = False


_envelope_decoder: Final = msgspec.json.Decoder(Envelope)


def envelope(line: bytes) -> Envelope | None:
    """The seq and batch flag of a stored line (its body is not decoded past them); None if
    the line is not a JSON object with a seq ≥ 0, invalid UTF-8 included."""
    try:
        env = _envelope_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return env if env.seq >= 0 else None


def decode_frame(line: bytes) -> Frame:
    """Decode one stored line (or a payload) into its frame. Raises msgspec errors on bad input
    (``msgspec.DecodeError``, invalid UTF-8 included)."""
    try:
        return _decoder.decode(line)
    except UnicodeDecodeError as exc:  # msgspec lets this one through as it is
        raise msgspec.DecodeError(f"invalid UTF-8: {exc}") from None


# --- building and checking frames -----------------------------------------------------------


def new_id() -> str:
    """A fresh random id (32 hex characters)."""
    return os.urandom(16).hex()


_MESSAGE_OVERHEAD_TOKENS: Final = 4
_IMAGE_TOKENS: Final = 1600


def estimate_message_tokens(content: list[ContentBlock]) -> int:
    """The deterministic token estimate of a message's content as a model would see it."""
    total = _MESSAGE_OVERHEAD_TOKENS
    for block in content:
        if isinstance(block, TextBlock | ThinkingBlock):
            total += estimate_text(block.text)
        elif isinstance(block, ToolUseBlock):
            total += estimate_text(block.name) + estimate_text(
                _encoder.encode(block.input).decode()
            )
        elif isinstance(block, ToolResultBlock):
            total += estimate_text(block.text)
            total += _IMAGE_TOKENS * sum(isinstance(p, ImageBlock) for p in block.parts)
        elif isinstance(block, ProviderBlock):
            total += estimate_text(block.text or _encoder.encode(block.data).decode())
        else:
            total += _IMAGE_TOKENS
    return total


def message(
    role: Role,
    text: str | None = None,
    *,
    content: list[ContentBlock] | None = None,
    message_id: str | None = None,
    source: SourceRef | None = None,
    ts_ms: int = 0,
) -> MessageAppended:
    """A ``message_appended`` frame with its id and token estimate filled in. Wrong arguments
    fail here, at once, naming the argument (:class:`BadFrame`), not later at append."""
    if role not in _ROLES:
        raise BadFrame(f"role must be one of {', '.join(map(repr, _ROLES))}, not {role!r}")
    if text is not None and not isinstance(text, str):
        raise BadFrame(f"text must be a string, not {type(text).__name__} (blocks go in content=)")
    if content is not None and not isinstance(content, list):
        raise BadFrame(f"content must be a list of blocks, not {type(content).__name__}")
    if message_id is not None and not isinstance(message_id, str):
        raise BadFrame(f"message_id must be a string, not {type(message_id).__name__}")
    blocks = content_blocks(content or [])
    if text is not None:
        blocks.insert(0, TextBlock(text=text))
    return MessageAppended(
        message_id=message_id or new_id(),
        role=role,
        content=blocks,
        tokens=estimate_message_tokens(blocks),
        source=source,
        ts_ms=ts_ms,
    )


_block_types: Final = (
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    ToolResultBlock,
    ImageBlock,
    ProviderBlock,
)


def content_blocks(content: list[Any]) -> list[ContentBlock]:
    """``content`` as blocks: plain dicts (``{"type": "text", "text": …}``, as provider APIs
    write them) are converted; anything that is not a block raises :class:`BadFrame`."""
    if all(isinstance(b, _block_types) for b in content):
        return list(content)
    if not isinstance(content, list):
        raise BadFrame(f"message content must be a list of blocks, not {type(content).__name__}")
    try:
        return [
            b if isinstance(b, _block_types) else msgspec.convert(b, ContentBlock) for b in content
        ]
    except msgspec.ValidationError as exc:
        raise BadFrame(f"message content is not a list of content blocks: {exc}") from None


def normalize(frame: Frame) -> Frame:
    """Fill what a caller may leave out of a message (its id and token estimate), and turn
    content given as plain dicts into blocks (re-estimating its tokens: an estimate made over
    dicts is wrong)."""
    if isinstance(frame, MessageAppended) and not all(
        isinstance(b, _block_types) for b in frame.content
    ):
        blocks = content_blocks(frame.content)
        return msgspec.structs.replace(
            frame,
            message_id=frame.message_id or new_id(),
            content=blocks,
            tokens=estimate_message_tokens(blocks),
        )
    if isinstance(frame, MessageAppended) and (not frame.message_id or frame.tokens <= 0):
        return msgspec.structs.replace(
            frame,
            message_id=frame.message_id or new_id(),
            tokens=frame.tokens if frame.tokens > 0 else estimate_message_tokens(frame.content),
        )
    return frame


def artifact_refs(frame: Frame) -> list[str]:
    """Every artifact id a frame points at (the ones ``verify`` must find)."""
    if isinstance(frame, MessageAppended):
        found: list[str] = []
        for b in frame.content:
            if isinstance(b, ToolResultBlock | ImageBlock) and b.artifact_id is not None:
                found.append(b.artifact_id)
            if isinstance(b, ToolResultBlock):
                found += [
                    p.artifact_id for p in b.parts if isinstance(p, ImageBlock) and p.artifact_id
                ]
        return found
    if isinstance(frame, CompactionCheckpointCreated):
        return [frame.summary_artifact_id]
    if isinstance(frame, ContextSelectionDecided | ContextSelectionRepeated):
        return [frame.bundle_artifact_id]
    if isinstance(frame, RecordAppended) and frame.artifact_id is not None:
        return [frame.artifact_id]
    return []


_shorthand_decoder: Final = msgspec.json.Decoder(dict[str, Any])
_SHORTHAND_KEYS: Final = frozenset({"role", "text", "message_id", "ts_ms", "seq"})
_TYPES: Final = frame_types()


def parse_payload(line: bytes | str) -> Frame:
    """One input line: a full frame payload ``{"type": ...}`` or the shorthand
    ``{"role": ..., "text": ...}``. Raises :class:`BadFrame` with a reason on bad input."""
    raw = line.encode() if isinstance(line, str) else line
    try:
        obj = _shorthand_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise BadFrame(f"not a JSON object: {exc}") from None
    if "digest" in obj or "more" in obj:
        raise BadFrame("`digest` and `more` are assigned by the store; remove them from the input")
    if "type" in obj and obj["type"] not in _TYPES:
        raise BadFrame(f"unknown frame type {obj['type']!r} (known: {', '.join(_TYPES)})")
    if "type" not in obj:
        if "role" not in obj:
            raise BadFrame('expected a frame {"type": ...} or a message {"role": ..., "text": ...}')
        unknown = sorted(set(obj) - _SHORTHAND_KEYS)
        if unknown:
            raise BadFrame(f"unknown field(s) in message shorthand: {', '.join(unknown)}")
        if not isinstance(obj.get("text"), str):
            raise BadFrame("message shorthand needs a string `text`")
        obj = {
            "type": "message_appended",
            "role": obj["role"],
            "content": [{"type": "text", "text": obj["text"]}],
            **{k: obj[k] for k in ("message_id", "ts_ms", "seq") if k in obj},
        }
    try:
        frame = msgspec.convert(obj, Frame)
    except msgspec.ValidationError as exc:
        raise BadFrame(_outside_closed_set(obj) or str(exc)) from None
    return normalize(frame)


def _outside_closed_set(obj: dict[str, Any]) -> str | None:
    """What is wrong when a field of a closed set (a message's ``role``, a job's ``status``)
    holds a value outside it, in :func:`message`'s words; None for any other mistake (msgspec
    then says it, naming the field)."""
    import typing

    for cls in typing.get_args(Frame):
        if cls.__struct_config__.tag == obj.get("type"):
            for field, hint in typing.get_type_hints(cls).items():
                values = typing.get_args(hint) if typing.get_origin(hint) is Literal else ()
                if field in obj and values and obj[field] not in values:
                    return (
                        f"{field} must be one of {', '.join(map(repr, values))}, not {obj[field]!r}"
                    )
    return None
