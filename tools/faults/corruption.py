"""Corruption: damage a store's logs, artifacts and caches; does ``verify`` see it, do reads lie?

    python -m tools.faults.corruption [--flips 500] [--others 100] [--cache-trials 10]
                                      [--kinds K,K,...] [--reads R,R,...] [--frames 2000]
                                      [--jobs 2] [--scale F] [--seed S] [--json] [--keep]

A store is prepared once: thread ``main`` (of a project, from Claude Code) of about
``--frames`` frames whose messages each carry distinctive words (a marker such as ``mk0412q`` and
a few rare words), tool calls and results, records and a retraction, checkpoints made by the
library's compaction (their summaries are artifacts) and one of another summary kind, a logged
compile (its bundle is an artifact), more messages after the last checkpoint; a small thread
``side``; and ``cc-tiny``, a Claude Code session (what ``sessions`` lists) of another project,
of 6 frames appended one at a time (under 64 KiB, so it keeps no per-thread caches). Its caches
are then built the way a user's are, by reads (``stats``, ``search``, ``search --thread main``,
``compile --dry-run``, ``log``).

Each trial damages a fresh copy of it in one way (``--flips`` trials of ``log-flip``,
``--others`` of every other log and artifact kind and of ``small-log-cut``, ``--cache-trials`` of
every cache kind):

* ``log-flip``: one byte of ``threads/main.jsonl`` XORed with a random non-zero value;
* ``log-truncate``: the log cut at a random offset (the caches, built before, still describe
  the whole log: a crash cannot make a log shorter than its caches say);
* ``log-delete``, ``log-duplicate``, ``log-swap``: a line deleted; a line copied right after
  itself or to the end; two lines swapped (adjacent ones half the time);
* ``small-log-cut``: ``cc-tiny``'s log cut by its last line or lines, at a line boundary (``head
  -n5 t.jsonl > x; cat x > t.jsonl``): a log that is whole, only shorter than the catalog and
  the search index recorded;
* ``artifact-flip``, ``artifact-truncate``: one byte of an artifact file, or the file cut;
* ``<file>-flip``, ``<file>-truncate``, ``<file>-empty`` for each kind of cache file (one byte
  flipped; the file cut at a random offset; cut to zero bytes), the files being
  ``catalog`` (``cache/catalog.v1.json``), ``main``'s per-thread caches ``offsets``,
  ``messages``, ``checkpoints`` (``.jsonl``), ``checkpoints-sel``, ``checkpoints-other``,
  ``marks``, ``thread-manifest`` (``manifest.v1.json``), its search index ``search-manifest``,
  ``search-docs``, ``search-tail``, ``search-segment`` (``cache/search/main/``) and the
  store-wide one ``store-manifest``, ``store-docs``, ``store-tail``, ``store-segment``
  (``cache/search-store/``);
* ``catalog-edit-frames``, ``-messages``, ``-checkpoints``, ``-project`` and
  ``<manifest>-edit-number``, ``-digest`` (the three manifests): one value changed to another
  valid one, the file still valid JSON (random flips mostly break the JSON; an edit is what
  lies): a catalog row's count (``"frames":6,`` to ``"frames":96,``) or project; a manifest's
  number (a 9 put before it) or one hex digit of a digest.

``--kinds`` also takes groups: ``cache-flip``, ``cache-truncate``, ``cache-empty``,
``cache-edit`` (that damage to every kind of cache file), a kind of file (``catalog``: every
damage to it), ``cache``, ``log``, ``artifact``. ``--reads relevant`` reads each cache kind only
with the reads that serve its file (:data:`RELEVANT`; the bounded test's form).

Then each command runs on its own fresh copy of the damaged store: ``verify``, and the reads
``log T --from-seq K`` (T: the damaged thread, ``main`` but for ``small-log-cut`` and a catalog
row's edit; K: the damaged frame's seq, a random one otherwise), ``log T``,
``compile T --dry-run --format text``, ``search "<marker> <word>"`` (the damaged or lost frame's
words), ``search --thread T "<marker> <word>"``, ``stats``, ``threads``, ``sessions``, and the
viewer's ``/api/threads``, ``/api/t/T``, ``/t/T`` and ``/api/search?q=<marker> <word>`` (the
viewer's app in a fresh process, each request on its own copy, through Starlette's test client;
its stderr caught per request). Each read's output is compared with the same read on the
undamaged store (the store's path and the byte sizes of ``stats`` aside). Counted:

* **verify detected**: exit 1 with a report that names the damaged thread (log kinds), the
  artifact (artifact kinds) or the cache file or its thread (cache kinds);
* a read is **same** (the undamaged output), **failed** (non-zero exit or HTTP status, a
  message, no traceback), **noted** (exit 0, another output, and a line on stderr the undamaged
  read does not print that names the damage: its file, thread or artifact, or a damaged,
  corrupt or rebuilt cache), or **silent wrong** (exit 0, another output, nothing said). For
  the five ``log-*`` kinds a damaged log allows no noted degrading: their reads fail or print
  exactly the undamaged output. For cache damage a failed read is also counted as a *needless
  error* (a cache can always be rebuilt from the logs);
* **tracebacks**: any ``Traceback`` on stderr, whatever the exit code (for the viewer: a 500
  "internal error").

The invariants: every cache file kind is present in the prepared store and every cache file is
of a kind damaged here; verify detects 100% of every kind; 0 silent wrong outputs; 0
tracebacks; 0 needless errors. The tables give each figure per kind.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tools.bench.bench_hooks import child_env
from tools.faults._common import (
    Examples,
    FamilyResult,
    Proc,
    Table,
    cli,
    comparable,
    family_parser,
    finish,
    first_difference,
    log,
    normalize,
    run as run_process,
    scaled,
    scratch,
    start,
    traceback_in,
    without_sizes,
)

if TYPE_CHECKING:
    from continuity.store.base import Thread
    from continuity.store.jsonl import Store

__all__ = [
    "CACHE_FILES",
    "CACHE_KINDS",
    "GROUPS",
    "KINDS",
    "READS",
    "KindCounts",
    "main",
    "prepare_store",
    "run",
    "run_counts",
]

THREAD: Final = "main"
SMALL: Final = "cc-tiny"
"""A thread under 64 KiB: it keeps no per-thread caches (ADR 0031)."""
SMALL_FRAMES: Final = 6
LOG_KINDS: Final = ("log-flip", "log-truncate", "log-delete", "log-duplicate", "log-swap")
SMALL_KINDS: Final = ("small-log-cut",)
ARTIFACT_KINDS: Final = ("artifact-flip", "artifact-truncate")
_THREAD_CACHE: Final = f"cache/threads/{THREAD}"
_THREAD_SEARCH: Final = f"cache/search/{THREAD}"
CACHE_FILES: Final = {
    "catalog": "cache/catalog.v1.json",
    "offsets": f"{_THREAD_CACHE}/offsets.v1.u64",
    "messages": f"{_THREAD_CACHE}/messages.v1.bin",
    "checkpoints": f"{_THREAD_CACHE}/checkpoints.v1.jsonl",
    "checkpoints-sel": f"{_THREAD_CACHE}/checkpoints.v1.sel",
    "checkpoints-other": f"{_THREAD_CACHE}/checkpoints.v1.other",
    "marks": f"{_THREAD_CACHE}/marks.v1.jsonl",
    "thread-manifest": f"{_THREAD_CACHE}/manifest.v1.json",
    "sums": f"{_THREAD_CACHE}/*.b3",
    "search-manifest": f"{_THREAD_SEARCH}/manifest.json",
    "search-docs": f"{_THREAD_SEARCH}/docs.bin",
    "search-tail": f"{_THREAD_SEARCH}/tail.jsonl",
    "search-segment": f"{_THREAD_SEARCH}/seg-*.bin",
    "store-manifest": "cache/search-store/manifest.json",
    "store-docs": "cache/search-store/docs.bin",
    "store-tail": "cache/search-store/tail-*.jsonl",
    "store-segment": "cache/search-store/seg-*.bin",
}
"""Each kind of cache file: where it is in the prepared store (a glob, relative to the store)."""
HOWS: Final = ("flip", "truncate", "empty")
EDITS: Final = {
    "catalog": ("frames", "messages", "checkpoints", "project"),
    "thread-manifest": ("number", "digest"),
    "search-manifest": ("number", "digest"),
    "store-manifest": ("number", "digest"),
}
"""The cache files whose values are also edited into other valid JSON, and what is edited."""
CACHE_DAMAGE: Final = {
    **{f"{f}-{h}": (f, h) for f in CACHE_FILES for h in HOWS},
    **{f"{f}-edit-{e}": (f, f"edit-{e}") for f, edits in EDITS.items() for e in edits},
}
"""Each cache kind: (its kind of file, how it is damaged)."""
CACHE_KINDS: Final = tuple(CACHE_DAMAGE)
KINDS: Final = LOG_KINDS + SMALL_KINDS + ARTIFACT_KINDS + CACHE_KINDS
GROUPS: Final = {
    "cache-flip": tuple(k for k in CACHE_KINDS if k.endswith("-flip")),
    "cache-truncate": tuple(k for k in CACHE_KINDS if k.endswith("-truncate")),
    "cache-empty": tuple(k for k in CACHE_KINDS if k.endswith("-empty")),
    "cache-edit": tuple(k for k in CACHE_KINDS if "-edit-" in k),
    "cache": CACHE_KINDS,
    "log": LOG_KINDS,
    "artifact": ARTIFACT_KINDS,
    **{f: tuple(k for k, (file, _) in CACHE_DAMAGE.items() if file == f) for f in CACHE_FILES},
}
"""Names ``--kinds`` takes for several kinds: one damage to every kind of cache file
(``cache-flip`` and ``cache-truncate`` were kinds of their own, a random file of
``cache/threads`` or ``cache/search``, before each kind of file was), every damage to one kind
of file (``catalog``), every cache kind, every log kind, every artifact kind."""
CLI_READS: Final = (
    "log --from-seq",
    "log",
    "compile --dry-run",
    "search",
    "search --thread",
    "stats",
    "threads",
    "sessions",
)
VIEWER_READS: Final = ("api/threads", "api/t", "t", "api/search")
"""The viewer's ``/api/threads``, ``/api/t/<thread>``, ``/t/<thread>``, ``/api/search?q=``."""
READS: Final = CLI_READS + VIEWER_READS
LISTINGS: Final = ("threads", "sessions", "api/threads")
"""Store-wide listings: a thread whose log is damaged is listed with its problem (and, by the
CLI, named on stderr) among the others, which stay readable: for log damage, such a listing is
counted as noted, where any other read must fail or print the undamaged output."""
_PER_THREAD: Final = ("log --from-seq", "compile --dry-run")
RELEVANT: Final = {
    "catalog": ("stats", "threads", "sessions", "api/threads", "api/t"),
    **{
        f: _PER_THREAD
        for f in (
            "offsets",
            "messages",
            "checkpoints",
            "checkpoints-sel",
            "checkpoints-other",
            "marks",
            "thread-manifest",
            "sums",
        )
    },
    **{f: ("search --thread",) for f in CACHE_FILES if f.startswith("search-")},
    **{f: ("search",) for f in CACHE_FILES if f.startswith("store-")},
}
"""``--reads relevant``: for each kind of cache file, the reads that serve what it holds (the
bounded test's choice, to keep it short; a full run does every read after every damage). Log,
artifact and small-log-cut damage get every read."""
_NOTE_WORDS: Final = ("damage", "corrupt", "rebuil", "checksum", "does not match", "differs")
"""Words of a stderr line that says a cache was found damaged (and rebuilt)."""
RARE: Final = (
    "abacus",
    "bergamot",
    "cormorant",
    "damask",
    "epaulette",
    "filigree",
    "gossamer",
    "harlequin",
    "isthmus",
    "juniper",
    "kestrel",
    "lamprey",
    "mandolin",
    "narwhal",
    "obsidian",
    "pangolin",
    "quince",
    "rosewood",
    "saffron",
    "tourmaline",
    "umbrella",
    "vermilion",
    "wainscot",
    "xylophone",
    "yarrow",
    "zeppelin",
    "anchovy",
    "bramble",
    "cassowary",
    "dirigible",
)
_CLOCK_MS: Final = 1_767_000_000_000


# --- the prepared store ---------------------------------------------------------------------


def env(store: Path) -> dict[str, str]:
    """The environment of every ``continuity`` this family runs: a user's (``child_env``), with
    the library's own threshold for a small thread's caches (the tests set it to 0, where every
    thread keeps caches; here ``cc-tiny`` must keep none, as a user's small thread)."""
    out = child_env(store)
    out.pop("CONTINUITY_SMALL_LOG_BYTES", None)
    return out


@dataclass(slots=True)
class Prepared:
    root: Path
    words: dict[int, str]
    """The search query for each message's seq of ``main``: its marker and one of its rare
    words."""
    lines: int
    """The frames of ``main``."""
    small_words: dict[int, str] = field(default_factory=dict)
    """The same for ``cc-tiny``."""
    frames: dict[str, int] = field(default_factory=dict)
    """Every thread's frames."""


def prepare_store(root: Path, frames: int, rng: random.Random) -> Prepared:
    """The undamaged store (see the module's docstring), its caches built by reads."""
    from continuity import (
        Limits,
        Store,
        ToolResultBlock,
        ToolUseBlock,
        compile_context,
        create_checkpoint,
        frames as fr,
        message,
    )
    from continuity.context.records import record
    from continuity.context.retract import retract
    from continuity.frames import ThreadCreated

    ms = [_CLOCK_MS]

    def clock() -> int:
        ms[0] += 1_000
        return ms[0]

    store = Store(root, create=True, durable=False, clock=clock)
    thread = store.thread(THREAD)
    thread.append(
        ThreadCreated(
            thread_id=THREAD,
            title="The invoice export",
            meta={"source": "claude-code", "project": "/work/shop", "git_branch": "fix/csv"},
        )
    )
    words: dict[int, str] = {}
    n = 0

    def turn() -> None:
        nonlocal n
        head = thread.head()
        seq = 1 if head is None else head.next_seq
        batch: list[fr.Frame] = []
        for role in ("user", "assistant"):
            marker = f"mk{n:04d}q"
            picked = rng.sample(RARE, 3)
            text = f"{marker}: the {picked[0]} and the {picked[1]} near the {picked[2]} module"
            words[seq + len(batch)] = f"{marker} {picked[1]}"
            batch.append(message(role, text, message_id=f"msg-{n:05d}"))
            n += 1
        if rng.random() < 0.3:
            tool_id = f"toolu_{n:06d}"
            call = ToolUseBlock(id=tool_id, name="Bash", input={"command": f"grep -rn mk{n:04d}"})
            out = ToolResultBlock(tool_use_id=tool_id, content=f"src/{rng.choice(RARE)}.py:12")
            batch += [
                message("assistant", content=[call], message_id=f"call-{n:05d}"),
                message("user", content=[out], message_id=f"out-{n:05d}"),
            ]
        thread.append(batch)

    def turns_until(share: float) -> None:
        while (thread.head() or _NoHead).next_seq < target * share:
            turn()

    made = [0]

    def checkpoints(n: int) -> None:
        # By create_checkpoint, not a compaction job: a job's frames carry random ids, which
        # would make two stores of the same seed differ (and a damaged byte's meaning with them).
        fresh = [s for s in sorted(words) if s > made[-1]]
        step = max(1, len(fresh) // (2 * n))
        for k in range(n, 0, -1):
            made.append(fresh[-1 - k * step])
            create_checkpoint(thread, made[-1])

    target = max(frames, 200)
    turns_until(0.3)
    record(thread, "faults.state", {"step": 1}, key="plan")
    turns_until(0.45)
    checkpoints(2)
    compile_context(thread, limits=Limits(recent_messages=12))
    record(thread, "faults.state", {"step": 2}, key="plan")
    retract(thread, seqs=[max(words)], reason="a wrong turn")
    turns_until(0.7)
    _other_checkpoint(store, thread)
    turns_until(0.9)
    checkpoints(2)
    compile_context(thread, limits=Limits(recent_messages=12))
    turns_until(1.0)
    side = store.thread("side")
    side.append(
        [
            message("user", f"side note {i} about the {rng.choice(RARE)}", message_id=f"side-{i}")
            for i in range(60)
        ]
    )
    small_words = _small_thread(store, rng)
    for args in (
        ["stats"],
        ["search", RARE[0]],
        ["search", "--thread", THREAD, RARE[1]],
        ["compile", THREAD, "--dry-run"],
        ["log", THREAD],
    ):
        p = cli(root, *args, env=env(root))
        if not p.ok:
            raise SystemExit(f"corruption: preparing the store: {p.describe()}")
    counts = {
        p.stem: p.read_bytes().count(b"\n") for p in sorted((root / "threads").glob("*.jsonl"))
    }
    return Prepared(root, words, counts[THREAD], small_words, counts)


class _NoHead:
    next_seq = 0


def _other_checkpoint(store: Store, thread: Thread) -> None:
    """A checkpoint whose summary is not of the cumulative kind (``checkpoints.v1.other``)."""
    from continuity.frames import CompactionCheckpointCreated

    head = thread.head()
    assert head is not None
    aid = store.artifacts.put(b'{"text": "a note on the first half, by hand"}')
    thread.append(
        CompactionCheckpointCreated(
            checkpoint_id="note-1",
            cut_rule_id="manual_v1",
            summary_kind="faults_note_v1",
            summary_artifact_id=aid,
            from_seq=0,
            to_seq=head.next_seq - 1,
            produced_by="faults",
        )
    )


def _small_thread(store: Store, rng: random.Random) -> dict[int, str]:
    """``cc-tiny``: a session of another project, its frames appended one at a time."""
    from continuity import message
    from continuity.frames import ThreadCreated

    tiny = store.thread(SMALL)
    tiny.append(
        ThreadCreated(
            thread_id=SMALL,
            title="A quick question",
            meta={"source": "claude-code", "project": "/work/garden"},
        )
    )
    words: dict[int, str] = {}
    for i in range(1, SMALL_FRAMES):
        marker, word = f"tn{i:02d}z", rng.choice(RARE)
        text = f"{marker}: what about the {word}?"
        words[tiny.append(message("user", text, message_id=f"tiny-{i}"))[0]] = f"{marker} {word}"
    return words


# --- damage ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Damage:
    kind: str
    what: str
    """How to do it again, in words (file, offset, bytes, lines)."""
    seq: int
    """The seq the damage is about (the damaged or lost frame), or a random one."""
    names: tuple[str, ...]
    """Strings of which verify's report must contain one to name the damage."""
    thread: str = THREAD
    """The thread the per-thread reads look at."""
    query: str = ""
    """The search query (empty: the words of ``seq`` in ``main``)."""


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    pos = data.find(b"\n")
    while pos >= 0 and pos + 1 < len(data):
        starts.append(pos + 1)
        pos = data.find(b"\n", pos + 1)
    return starts


def damage(store: Path, kind: str, rng: random.Random, lines: int) -> Damage:
    """Damage ``store`` (a copy) in one way of ``kind``."""
    if kind in LOG_KINDS:
        return _damage_log(store, kind, rng)
    if kind in SMALL_KINDS:
        return _cut_small(store, rng)
    any_seq = rng.randrange(lines)
    if kind in ARTIFACT_KINDS:
        return _damage_artifact(store, kind, rng, any_seq)
    return _damage_cache(store, kind, rng, any_seq)


def _damage_log(store: Path, kind: str, rng: random.Random) -> Damage:
    path = store / "threads" / f"{THREAD}.jsonl"
    data = path.read_bytes()
    starts = _line_starts(data)
    rows = data.split(b"\n")[:-1]
    names = (f"thread {THREAD}", f"'{THREAD}'", f"{THREAD}.jsonl")
    if kind == "log-flip":
        at = rng.randrange(len(data))
        seq = _line_of(starts, at)
        new = data[at] ^ rng.randrange(1, 256)
        path.write_bytes(data[:at] + bytes([new]) + data[at + 1 :])
        what = f"byte {at} of {path.name} (seq {seq}) {data[at]:#04x} -> {new:#04x}"
    elif kind == "log-truncate":
        at = rng.randrange(1, len(data))
        seq = _line_of(starts, at)
        path.write_bytes(data[:at])
        what = f"{path.name} cut at byte {at} of {len(data)} (inside seq {seq})"
    elif kind == "log-delete":
        seq = rng.randrange(len(rows))
        del rows[seq]
        path.write_bytes(b"".join(r + b"\n" for r in rows))
        what = f"line of seq {seq} deleted from {path.name}"
    elif kind == "log-duplicate":
        seq = rng.randrange(len(rows))
        to = seq + 1 if rng.random() < 0.5 else len(rows)
        rows.insert(to, rows[seq])
        path.write_bytes(b"".join(r + b"\n" for r in rows))
        where = "right after itself" if to == seq + 1 else "at the end"
        what = f"line of seq {seq} of {path.name} copied {where}"
    else:
        a = rng.randrange(len(rows) - 1)
        b = a + 1 if rng.random() < 0.5 else rng.randrange(a + 1, len(rows))
        rows[a], rows[b] = rows[b], rows[a]
        path.write_bytes(b"".join(r + b"\n" for r in rows))
        seq = a
        what = f"lines of seq {a} and {b} of {path.name} swapped"
    return Damage(kind, what, seq, names)


def _cut_small(store: Path, rng: random.Random) -> Damage:
    """``cc-tiny``'s log cut by its last line (half the time) or lines, at a line boundary."""
    path = store / "threads" / f"{SMALL}.jsonl"
    rows = path.read_bytes().split(b"\n")[:-1]
    keep = len(rows) - 1 if rng.random() < 0.5 else rng.randrange(2, len(rows))
    path.write_bytes(b"".join(r + b"\n" for r in rows[:keep]))
    what = f"{path.name} cut to its first {keep} of {len(rows)} lines (head -n{keep})"
    names = (f"thread {SMALL}", f"'{SMALL}'", f"{SMALL}.jsonl")
    return Damage("small-log-cut", what, keep, names, SMALL)


def _damage_artifact(store: Path, kind: str, rng: random.Random, any_seq: int) -> Damage:
    files = sorted((store / "artifacts").rglob("*.zst"))
    path = rng.choice(files)
    aid = path.name.removesuffix(".zst")
    original = path.read_bytes()
    what = ""
    for _ in range(_HARMLESS_RETRIES):
        what = _damage_file(path, kind.rpartition("-")[2], rng)
        if not _reads_the_same(store, aid):
            break
        # A flipped bit zstd does not read (a frame header field that changes nothing the
        # decoder returns): the artifact still holds its content, so this is no damage to
        # detect. Put the byte back and damage another one.
        path.write_bytes(original)
    return Damage(kind, f"artifact {aid[:16]}…: {what}", any_seq, (aid,))


def cache_files(store: Path, file_kind: str) -> list[Path]:
    """The files of ``file_kind`` (a key of :data:`CACHE_FILES`) in ``store``, non-empty ones."""
    return sorted(p for p in store.glob(CACHE_FILES[file_kind]) if p.is_file() and p.stat().st_size)


def _damage_cache(store: Path, kind: str, rng: random.Random, any_seq: int) -> Damage:
    file_kind, how = CACHE_DAMAGE[kind]
    files = cache_files(store, file_kind)
    if not files:
        raise FileNotFoundError(f"no {CACHE_FILES[file_kind]} in the prepared store")
    path = rng.choice(files)
    rel = path.relative_to(store)
    thread = THREAD
    if how.startswith("edit-"):
        what, thread = _edit(path, file_kind, rng, how.removeprefix("edit-"))
    else:
        what = _damage_file(path, how, rng)
    if rel.parts[1] in ("threads", "search"):
        tid = rel.parts[2]
        names: tuple[str, ...] = (path.name, f"thread {tid}", tid)
    elif file_kind == "catalog":
        names = (path.name, "catalog")
    else:
        names = (path.name, "search-store", "store-wide search")
    seq = any_seq if thread == THREAD else rng.randrange(SMALL_FRAMES)
    return Damage(kind, f"{rel}: {what}", seq, names, thread)


_NUMBER: Final = re.compile(rb"(?<=[:\[,])\d+(?=[,\]}])")
_DIGEST: Final = re.compile(rb'(?<=")[0-9a-f]{64}(?=")')


def _edit(path: Path, file_kind: str, rng: random.Random, edit: str) -> tuple[str, str]:
    """Change one value of a JSON cache file to another valid one (``edit``: which, see
    :data:`EDITS`); (what was done, the thread it is about)."""
    data = path.read_bytes()
    if file_kind == "catalog":
        return _edit_catalog(path, data, rng, edit)
    if edit == "number":
        found = list(_NUMBER.finditer(data))
        m = rng.choice(found)
        new = b"9" + m.group()
    else:
        found = list(_DIGEST.finditer(data))
        m = rng.choice(found)
        at = rng.randrange(64)
        old = m.group()
        new = old[:at] + rng.choice([c for c in b"0123456789abcdef" if c != old[at]]).to_bytes(
            1, "big"
        )
        new += old[at + 1 :]
    path.write_bytes(data[: m.start()] + new + data[m.end() :])
    return f"{m.group().decode()} at byte {m.start()} changed to {new.decode()}", THREAD


def _edit_catalog(path: Path, data: bytes, rng: random.Random, what: str) -> tuple[str, str]:
    """A catalog row's ``what`` changed: a count to another number (``"frames":6,`` to
    ``"frames":96,``), the project to another project."""
    rows = json.loads(data)["threads"]
    tid = rng.choice([r["thread_id"] for r in rows if what in r])
    begin = data.index(b'{"thread_id":' + json.dumps(tid).encode())
    end = data.find(b'{"thread_id":', begin + 1)
    end = len(data) if end < 0 else end
    value = rb'"[^"]*"' if what == "project" else rb"\d+"
    m = re.compile(b'"' + what.encode() + b'":(' + value + b")").search(data, begin, end)
    assert m is not None, f"no {what} in the catalog row of {tid}"
    old = m.group(1)
    new = b'"/work/elsewhere"' if what == "project" else b"9" + old
    path.write_bytes(data[: m.start(1)] + new + data[m.end(1) :])
    key = what.encode()
    shown = (b'"' + key + b'":' + old).decode() + " -> " + (b'"' + key + b'":' + new).decode()
    return f"row of thread {tid}: {shown}", tid


def _line_of(starts: list[int], offset: int) -> int:
    from bisect import bisect_right

    return bisect_right(starts, offset) - 1


_HARMLESS_RETRIES: Final = 20


def _reads_the_same(store: Path, aid: str) -> bool:
    """Whether the artifact still reads back as the content its id names, after the damage."""
    from continuity.errors import ContinuityError
    from continuity.store.jsonl import Store

    try:
        Store(store, durable=False).artifacts.get(aid)
    except (ContinuityError, OSError, ValueError):
        return False
    return True


def _damage_file(path: Path, how: str, rng: random.Random) -> str:
    data = path.read_bytes()
    if how == "flip":
        at = rng.randrange(len(data))
        new = data[at] ^ rng.randrange(1, 256)
        path.write_bytes(data[:at] + bytes([new]) + data[at + 1 :])
        return f"byte {at} of {len(data)} {data[at]:#04x} -> {new:#04x}"
    if how == "empty":
        path.write_bytes(b"")
        return f"cut to 0 bytes (of {len(data)})"
    at = rng.randrange(1, len(data)) if len(data) > 1 else 0
    path.write_bytes(data[:at])
    return f"cut at byte {at} of {len(data)}"


def uncovered_cache_files(store: Path) -> list[str]:
    """Cache files of ``store`` that no kind of :data:`CACHE_FILES` damages (locks, job locks
    and the caches of the threads without their own aside)."""
    covered = {p for pattern in CACHE_FILES.values() for p in store.glob(pattern)}
    out = []
    for p in sorted((store / "cache").rglob("*")):
        rel = p.relative_to(store / "cache")
        if not p.is_file() or p.name.endswith(".lock") or rel.parts[0] in ("jobs", "claude-code"):
            continue
        if p not in covered:
            out.append(str(rel))
    return out


# --- reads ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Read:
    """One read's outcome, comparable with the undamaged store's."""

    code: int | None
    """The exit code (the HTTP status for the viewer's reads)."""
    out: bytes
    err: bytes
    traceback: bool = False


def _commands(d: Damage) -> dict[str, list[str]]:
    t = d.thread
    return {
        "verify": ["verify"],
        "log --from-seq": ["log", t, "--from-seq", str(d.seq)],
        "log": ["log", t],
        "compile --dry-run": ["compile", t, "--dry-run", "--format", "text"],
        "search": ["search", d.query],
        "search --thread": ["search", "--thread", t, d.query],
        "stats": ["stats"],
        "threads": ["threads"],
        "sessions": ["sessions"],
    }


def _requests(d: Damage) -> dict[str, str]:
    t = urllib.parse.quote(d.thread, safe="")
    return {
        "api/threads": "/api/threads",
        "api/t": f"/api/t/{t}",
        "t": f"/t/{t}",
        "api/search": "/api/search?" + urllib.parse.urlencode({"q": d.query}),
    }


_VIEWER: Final = r"""
import json, os, shutil, sys, traceback
from pathlib import Path

source, work, paths = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
from starlette.testclient import TestClient
from continuity.store.locate import open_store
from continuity.viewer.app import create_app

saved = os.dup(2)
answers = []
for i, path in enumerate(paths):
    copy, err = work / f"viewer-{i}", work / f"viewer-{i}.err"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    status, body = -1, b""
    with open(err, "wb") as f:
        sys.stderr.flush()
        os.dup2(f.fileno(), 2)
        try:
            store = open_store(str(copy))
            try:
                with TestClient(create_app(store, token=None)) as client:
                    r = client.get(path)
                status, body = r.status_code, r.content
            finally:
                store.close()
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
    text = err.read_bytes()
    where = str(copy).encode()
    answers.append([status, body.replace(where, b"<store>").decode("latin-1"),
                    text.replace(where, b"<store>").decode("latin-1")])
    shutil.rmtree(copy, ignore_errors=True)
    err.unlink()
json.dump(answers, sys.stdout)
"""
"""The viewer's app on a copy of a store per request (its stderr caught per request): prints
``[[status, body, stderr], ...]`` (bytes as latin-1), one per path asked."""


def viewer_reads(store: Path, work: Path, paths: list[str]) -> list[Read]:
    """``paths`` asked of the viewer's app on ``store``, each on its own fresh copy (under
    ``work``), in one fresh process that imports the library as ``continuity`` does."""
    work.mkdir(parents=True, exist_ok=True)
    p = run_process(
        [sys.executable, "-c", _VIEWER, str(store), str(work), json.dumps(paths)],
        env=env(store),
        timeout=300,
    )
    if p.code != 0:
        raise RuntimeError(f"the viewer's reads failed: {p.describe()}")
    out = []
    for status, body, err in json.loads(p.stdout):
        raw = body.encode("latin-1")
        crashed = traceback_in(err.encode("latin-1")) or (
            status == 500 and b"internal error" in raw
        )
        out.append(Read(status, without_sizes(raw), err.encode("latin-1"), crashed))
    return out


def _ok(read: Read, name: str) -> bool:
    return read.code == (200 if name in VIEWER_READS else 0)


class Baselines:
    """Each read's output on the undamaged store (run once per distinct read)."""

    def __init__(self, master: Path, work: Path) -> None:
        self.master = master
        self.work = work
        self.lock = threading.Lock()
        self.known: dict[tuple[str, ...], Read] = {}
        self.slots = 0

    def _slot(self) -> Path:
        with self.lock:
            self.slots += 1
            return self.work / f"baseline-{self.slots}"

    def get(self, name: str, args: list[str]) -> Read:
        key = tuple(args)
        with self.lock:
            if key in self.known:
                return self.known[key]
        if name == "log --from-seq":
            # The full log's lines from seq K on (one line per frame, seqs from 0): one process
            # fewer per trial (check_derived compares one with a real run).
            full = self.get("log", ["log", args[1]])
            k = int(args[args.index("--from-seq") + 1])
            derived = Read(full.code, b"".join(full.out.splitlines(keepends=True)[k:]), full.err)
            with self.lock:
                self.known[key] = derived
            return derived
        slot = self._slot()
        shutil.copytree(self.master, slot)
        p = cli(slot, *args, env=env(slot))
        got = Read(p.code, comparable(name, p, slot), normalize(p.stderr, slot))
        shutil.rmtree(slot, ignore_errors=True)
        if not p.ok:
            raise SystemExit(f"corruption: {p.describe()} on the undamaged store")
        with self.lock:
            self.known[key] = got
        return got

    def viewer(self, requests: dict[str, str]) -> dict[str, Read]:
        """The viewer's answers to ``requests`` (read name → path) on the undamaged store."""
        with self.lock:
            missing = [p for p in requests.values() if ("viewer", p) not in self.known]
        if missing:
            slot = self._slot()
            got = viewer_reads(self.master, slot, missing)
            shutil.rmtree(slot, ignore_errors=True)
            for path, read in zip(missing, got, strict=True):
                if read.code != 200:
                    raise SystemExit(f"corruption: viewer {path} gave {read.code} undamaged")
                with self.lock:
                    self.known["viewer", path] = read
        with self.lock:
            return {name: self.known["viewer", path] for name, path in requests.items()}

    def check_derived(self) -> None:
        """The derived ``log --from-seq`` baselines hold: one real run compared."""
        args = ["log", THREAD, "--from-seq", "7"]
        derived = self.get("log --from-seq", args)
        with self.lock:
            del self.known[tuple(args)]
        slot = self.work / "baseline-check"
        shutil.copytree(self.master, slot)
        p = cli(slot, *args, env=env(slot))
        real = (p.code, comparable("log --from-seq", p, slot))
        shutil.rmtree(slot, ignore_errors=True)
        if real != (derived.code, derived.out):
            raise SystemExit("corruption: `log --from-seq K` is not the lines of `log` from K")


# --- trials ---------------------------------------------------------------------------------


@dataclass(slots=True)
class KindCounts:
    trials: int = 0
    detected: int = 0
    unnamed: int = 0
    """verify exited 1 but its report did not name the damage."""
    missed: int = 0
    verify_other: int = 0
    tracebacks: int = 0
    reads: int = 0
    same: int = 0
    errors: int = 0
    silent: dict[str, int] = field(default_factory=dict)
    needless: int = 0
    noted: int = 0
    """Exit 0, another output, and a new line on stderr naming the damage."""
    read_tracebacks: dict[str, int] = field(default_factory=dict)
    absent: int = 0
    """Trials not run: the prepared store has no file of this kind."""

    @property
    def silent_total(self) -> int:
        return sum(self.silent.values())


@dataclass(slots=True)
class Trial:
    prepared: Prepared
    baselines: Baselines
    reads: tuple[str, ...]
    relevant: bool
    counts: dict[str, KindCounts]
    examples: Examples
    lock: threading.Lock


def _trial(t: Trial, kind: str, seed: int, slot: Path) -> None:
    rng = random.Random(seed)
    shutil.rmtree(slot, ignore_errors=True)
    damaged = slot / "damaged"
    shutil.copytree(t.prepared.root, damaged)
    try:
        d = damage(damaged, kind, rng, t.prepared.lines)
    except FileNotFoundError:
        with t.lock:
            t.counts[kind].absent += 1
        shutil.rmtree(slot, ignore_errors=True)
        return
    if not d.query:
        words = t.prepared.small_words if d.thread == SMALL else t.prepared.words
        d.query = words.get(d.seq) or t.prepared.words[rng.choice(sorted(t.prepared.words))]
    where = f"[{kind} seed {seed}] {d.what}"
    reads = reads_of(kind, t.reads, t.relevant)
    run_dir = slot / "run"
    for name, args in _commands(d).items():
        if name != "verify" and name not in reads:
            continue
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.copytree(damaged, run_dir)
        p = cli(run_dir, *args, env=env(run_dir))
        read = Read(p.code, comparable(name, p, run_dir), normalize(p.stderr, run_dir), p.traceback)
        cmd = "`" + p.command().split(" ", 1)[1] + "`" if " " in p.command() else p.command()
        with t.lock:
            if name == "verify":
                _count_verify(p, d, where, t.counts[kind], t.examples)
            else:
                base = t.baselines.get(name, args)
                _count(name, cmd, read, base, d, where, t.counts[kind], t.examples)
    requests = {n: path for n, path in _requests(d).items() if n in reads}
    if requests:
        bases = t.baselines.viewer(requests)
        got = viewer_reads(damaged, slot / "viewer", list(requests.values()))
        for (name, path), read in zip(requests.items(), got, strict=True):
            with t.lock:
                cmd = f"viewer GET {path}"
                _count(name, cmd, read, bases[name], d, where, t.counts[kind], t.examples)
    shutil.rmtree(slot, ignore_errors=True)


def reads_of(kind: str, reads: tuple[str, ...], relevant: bool) -> tuple[str, ...]:
    """The reads made after a damage of ``kind``: ``reads``, only those :data:`RELEVANT` to a
    cache kind with ``relevant``."""
    if not relevant or kind not in CACHE_DAMAGE:
        return reads
    keep = RELEVANT[CACHE_DAMAGE[kind][0]]
    return tuple(r for r in reads if r in keep)


def _count_verify(p: Proc, d: Damage, where: str, c: KindCounts, examples: Examples) -> None:
    report = (p.stdout + p.stderr).decode(errors="replace")
    c.trials += 1
    if p.traceback:
        c.tracebacks += 1
        examples.add(f"{d.kind}: verify traceback", f"{where}: {p.describe(300)}")
    if p.code == 1 and any(n in report for n in d.names):
        c.detected += 1
    elif p.code == 1:
        c.unnamed += 1
        examples.add(
            f"{d.kind}: verify does not name the damage",
            f"{where}: {report.strip()[-300:]!r}",
        )
    elif p.code == 0:
        c.missed += 1
        examples.add(f"{d.kind}: verify says ok", f"{where}: {report.strip()[-200:]!r}")
    else:
        c.verify_other += 1
        examples.add(f"{d.kind}: verify exit {p.code}", f"{where}: {p.describe(300)}")


def noted(read: Read, base: Read, d: Damage) -> bool:
    """Whether ``read``'s stderr has a line the undamaged read's has not that names the damage:
    its file, thread or artifact — or, for a cache or a small thread's log, says it found a cache
    damaged (or rebuilt one)."""
    before = set(base.err.splitlines())
    words = d.names if d.kind in ARTIFACT_KINDS else d.names + _NOTE_WORDS
    for line in read.err.splitlines():
        text = line.decode(errors="replace")
        if line not in before and any(w in text or w in text.lower() for w in words):
            return True
    return _problem_in_band(read, base, words)


def _problem_in_band(read: Read, base: Read, words: tuple[str, ...]) -> bool:
    """A JSON answer of the viewer's API that reports the damage itself: a ``"problem"`` the
    undamaged answer has not, which names it (the thread list's row of an unreadable thread)."""
    if read.out.count(b'"problem":"') <= base.out.count(b'"problem":"'):
        return False
    text = read.out.decode(errors="replace")
    problems = [part.split('"', 1)[0] for part in text.split('"problem":"')[1:]]
    return any(w in p or w in p.lower() for p in problems for w in words)


def _count(
    name: str,
    cmd: str,
    read: Read,
    base: Read,
    d: Damage,
    where: str,
    c: KindCounts,
    examples: Examples,
) -> None:
    c.reads += 1
    if read.traceback:
        c.read_tracebacks[name] = c.read_tracebacks.get(name, 0) + 1
        err = read.err.decode(errors="replace").strip().splitlines()
        said = err[-1] if err else read.out[-200:].decode(errors="replace")
        examples.add(f"{d.kind}: {name} traceback", f"{where}: {cmd} gave {read.code}: {said}")
    elif read.code == base.code and read.out == base.out:
        c.same += 1
    elif not _ok(read, name):
        c.errors += 1
        if d.kind in CACHE_KINDS:
            c.needless += 1
            said = (read.err or read.out).decode(errors="replace").strip()[-300:]
            examples.add(
                f"{d.kind}: {name} fails over a rebuildable cache",
                f"{where}: {cmd} gave {read.code}: {said}",
            )
    elif (d.kind not in LOG_KINDS or name in LISTINGS) and noted(read, base, d):
        c.noted += 1
    else:
        c.silent[name] = c.silent.get(name, 0) + 1
        examples.add(
            f"{d.kind}: {name} silently wrong",
            f"{where}: {cmd} gave {read.code}, nothing on stderr; "
            f"{first_difference(read.out, base.out)}",
        )


def run_counts(
    *,
    flips: int = 500,
    others: int = 100,
    cache_trials: int = 10,
    kinds: tuple[str, ...] = KINDS,
    reads: tuple[str, ...] = READS,
    relevant: bool = False,
    frames: int = 2_000,
    jobs: int = 2,
    seed: int | None = None,
    keep: bool = False,
    examples_per_kind: int = 3,
) -> tuple[FamilyResult, dict[str, KindCounts]]:
    """:func:`run`, and its counts by kind (what the bounded test asserts, kind by kind)."""
    started = time.perf_counter()
    seed, rng = start("corruption", seed)
    result = FamilyResult(
        "corruption",
        {
            "flips": flips,
            "others": others,
            "cache_trials": cache_trials,
            "reads": "relevant" if relevant else ("all" if reads == READS else ",".join(reads)),
            "frames": frames,
            "jobs": jobs,
            "seed": seed,
        },
    )
    examples = Examples(examples_per_kind)
    counts = {k: KindCounts() for k in kinds}
    lock = threading.Lock()
    with scratch("corruption", keep) as work:
        log(f"corruption: preparing a store of {frames} frames")
        prepared = prepare_store(work / "master", frames, rng)
        absent = [f for f in CACHE_FILES if not cache_files(prepared.root, f)]
        uncovered = uncovered_cache_files(prepared.root)
        baselines = Baselines(prepared.root, work)
        baselines.check_derived()

        def trials(kind: str) -> int:
            if kind == "log-flip":
                return flips
            return cache_trials if kind in CACHE_KINDS else others

        # Each trial's seed is made of the run's, its kind and its number, so a kind's trials
        # are the same whichever other kinds run (a subset of --kinds repeats them).
        plan = [
            (kind, random.Random(f"{seed}:{kind}:{i}").getrandbits(32))
            for kind in kinds
            for i in range(trials(kind))
        ]
        rng.shuffle(plan)
        log(f"corruption: {len(plan)} trials on {jobs} workers")
        free = list(range(jobs))
        done = [0]
        t = Trial(prepared, baselines, reads, relevant, counts, examples, lock)

        def one(item: tuple[str, int]) -> None:
            with lock:
                slot_id = free.pop()
            try:
                kind, trial_seed = item
                _trial(t, kind, trial_seed, work / f"slot-{slot_id}")
            finally:
                with lock:
                    free.append(slot_id)
                    done[0] += 1
                    if done[0] % 50 == 0:
                        log(f"corruption: {done[0]} of {len(plan)} trials")

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, plan))
    _report(result, counts, reads)
    result.check(
        "every cache file kind is in the prepared store",
        not absent,
        "absent: " + ", ".join(f"{f} ({CACHE_FILES[f]})" for f in absent) if absent else "",
    )
    result.check(
        "every cache file is of a kind damaged here",
        not uncovered,
        "not covered: " + ", ".join(uncovered) if uncovered else "",
    )
    result.examples = examples.lines()
    result.seconds = time.perf_counter() - started
    return result, counts


def run(
    *,
    flips: int = 500,
    others: int = 100,
    cache_trials: int = 10,
    kinds: tuple[str, ...] = KINDS,
    reads: tuple[str, ...] = READS,
    relevant: bool = False,
    frames: int = 2_000,
    jobs: int = 2,
    seed: int | None = None,
    keep: bool = False,
    examples_per_kind: int = 3,
) -> FamilyResult:
    """Damage copies of a prepared store; verify and read each (see the module's docstring)."""
    return run_counts(
        flips=flips,
        others=others,
        cache_trials=cache_trials,
        kinds=kinds,
        reads=reads,
        relevant=relevant,
        frames=frames,
        jobs=jobs,
        seed=seed,
        keep=keep,
        examples_per_kind=examples_per_kind,
    )[0]


def _report(result: FamilyResult, counts: dict[str, KindCounts], reads: tuple[str, ...]) -> None:
    ran = {k: c for k, c in counts.items() if c.trials}
    result.tables.append(
        Table(
            "verify on the damaged store",
            ["damage", "trials", "detected", "%", "exit 1, unnamed", "said ok", "other", "tb"],
            [
                [
                    k,
                    c.trials,
                    c.detected,
                    f"{100 * c.detected / c.trials:.0f}%",
                    c.unnamed,
                    c.missed,
                    c.verify_other,
                    c.tracebacks,
                ]
                for k, c in ran.items()
            ],
        )
    )
    result.tables.append(
        Table(
            "reads on the damaged store (each against the undamaged store's output)",
            [
                "damage",
                "reads",
                "same",
                "failed",
                "noted",
                "SILENT WRONG",
                "needless errors",
                "tracebacks",
            ],
            [
                [
                    k,
                    c.reads,
                    c.same,
                    c.errors,
                    c.noted,
                    c.silent_total,
                    c.needless,
                    sum(c.read_tracebacks.values()),
                ]
                for k, c in ran.items()
            ],
        )
    )
    _by_read(result, "silent wrong outputs by read", {k: c.silent for k, c in ran.items()}, reads)
    _by_read(result, "tracebacks by read", {k: c.read_tracebacks for k, c in ran.items()}, reads)
    _checks(result, ran)
    absent = {k: c.absent for k, c in counts.items() if c.absent}
    if absent:
        result.notes.append(
            "trials not run, no such file in the prepared store: "
            + ", ".join(f"{k} {v}" for k, v in absent.items())
        )


def _by_read(
    result: FamilyResult, title: str, per_kind: dict[str, dict[str, int]], reads: tuple[str, ...]
) -> None:
    """A table of the kinds with any, by read (only the reads with any); none when none."""
    kinds = [k for k, by in per_kind.items() if by]
    cols = [r for r in reads if any(per_kind[k].get(r) for k in kinds)]
    if kinds:
        rows = [[k, *(per_kind[k].get(r, 0) for r in cols)] for k in kinds]
        result.tables.append(Table(title, ["damage", *cols], rows))


def _checks(result: FamilyResult, counts: dict[str, KindCounts]) -> None:
    trials = sum(c.trials for c in counts.values())
    detected = sum(c.detected for c in counts.values())
    missed = {k: c.trials - c.detected for k, c in counts.items() if c.trials - c.detected}
    result.check(
        "verify detects (exit 1, naming it) 100% of the damage",
        not missed,
        f"{detected} of {trials}; missed: " + ", ".join(f"{k} {v}" for k, v in missed.items())
        if missed
        else f"{detected} of {trials}",
    )
    silent = {k: c.silent_total for k, c in counts.items() if c.silent}
    result.check(
        "0 silent wrong outputs",
        not silent,
        ", ".join(f"{k} {v}" for k, v in silent.items()),
    )
    tbs = {
        k: c.tracebacks + sum(c.read_tracebacks.values())
        for k, c in counts.items()
        if c.tracebacks or c.read_tracebacks
    }
    result.check("0 tracebacks", not tbs, ", ".join(f"{k} {v}" for k, v in tbs.items()))
    needless = {k: c.needless for k, c in counts.items() if c.needless}
    result.check(
        "reads over a damaged cache do not fail",
        not needless,
        ", ".join(f"{k} {v} failed reads" for k, v in needless.items()),
    )


def _kinds(text: str) -> tuple[str, ...]:
    chosen: list[str] = []
    for name in (k.strip() for k in text.split(",") if k.strip()):
        if name not in KINDS and name not in GROUPS:
            known = ", ".join([*GROUPS, *KINDS])
            raise SystemExit(f"unknown kind {name!r}; known: {known}")
        chosen += [k for k in GROUPS.get(name, (name,)) if k not in chosen]
    return tuple(chosen)


def _reads(text: str) -> tuple[str, ...]:
    if text.strip() == "relevant":
        return ("relevant",)
    chosen = tuple(r.strip() for r in text.split(",") if r.strip())
    unknown = [r for r in chosen if r not in READS]
    if unknown:
        raise SystemExit(f"unknown reads {unknown}; known: {', '.join(READS)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = family_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--flips", type=int, default=500, help="log-flip trials")
    parser.add_argument(
        "--others",
        type=int,
        default=100,
        help="trials of every other log kind, of small-log-cut and of the artifact kinds",
    )
    parser.add_argument(
        "--cache-trials", type=int, default=10, help="trials of every cache kind (default 10)"
    )
    parser.add_argument(
        "--kinds",
        type=_kinds,
        default=KINDS,
        help=f"kinds or groups ({', '.join(GROUPS)}); default all",
    )
    parser.add_argument(
        "--reads",
        type=_reads,
        default=READS,
        help=f"of {', '.join(READS)}; or 'relevant' (to each cache kind its own); default all",
    )
    parser.add_argument("--frames", type=int, default=2_000, help="frames of the main thread")
    parser.add_argument("--examples", type=int, default=3, help="examples kept per failure")
    args = parser.parse_args(argv)
    result = run(
        flips=scaled(args.flips, args.scale),
        others=scaled(args.others, args.scale),
        cache_trials=scaled(args.cache_trials, args.scale),
        kinds=args.kinds,
        reads=READS if args.reads == ("relevant",) else args.reads,
        relevant=args.reads == ("relevant",),
        frames=args.frames,
        jobs=args.jobs,
        seed=args.seed,
        keep=args.keep,
        examples_per_kind=args.examples,
    )
    return finish([result], args.json)


if __name__ == "__main__":
    sys.exit(main())
