"""Generate a store of N small Claude-Code-like threads, deterministically from a seed.

    python -m tools.bench.gen_threads --store PATH --threads N [--seed S]

A year of Claude Code use is thousands of short sessions, each with a few subagents: this writes
that shape, fast. About a quarter of the threads are subagents
(``cc-<session>.agent-<id>``, linked to their session by ``parent_thread_id``); every thread
starts with the ``thread_created`` the adapter writes (``meta``: source ``claude-code``, project,
branch, version, transcript, session id) and holds one to a few turns of the frames
``tools/gen_thread.py`` makes (prompts, tool calls and results, replies, observations), about
4 KB a thread on average (10,000 threads are about 40 MB of logs, the store of issue 16). About
one thread in 25 holds a Claude Code compaction checkpoint, and one message in 100 is marked as
redacted (``meta["redacted"]``), so ``stats`` has something to count.

The frames of all threads are drawn from one long generated stream cut at turn boundaries (one
generator, not one per thread: that is what keeps 10,000 threads to seconds), renumbered by the
store as each thread is appended in one batch through the store API (sealed and chained there).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.summary import CUMULATIVE_V1, SummaryDoc, summary_bytes
from tools.gen_thread import FIXED_CLOCK_MS, generate_frames

__all__ = ["ThreadsStats", "main", "write_threads"]

_PROJECTS: Final = tuple(
    f"/home/dev/{name}"
    for name in (
        "continuity",
        "webapp",
        "infra",
        "ml-pipeline",
        "docs-site",
        "billing",
        "mobile",
        "search-api",
        "etl",
        "dotfiles",
        "scraper",
        "game-engine",
    )
)
_BRANCHES: Final = ("main", "main", "main", "dev", "fix/cursor", "feat/search", "release/2.1")
_SUBAGENT_RATE: Final = 0.25
_CHECKPOINT_RATE: Final = 0.04
_REDACTED_RATE: Final = 0.01
_MEDIAN_LOG: Final = 7.3
"""The log of the median byte budget of a thread (about 1.5 KB; whole turns overshoot it: the
threads average about 4 KB)."""
_MIN_BYTES: Final = 600
_MAX_BYTES: Final = 80_000


@dataclass(frozen=True, slots=True)
class ThreadsStats:
    threads: int
    frames: int
    log_bytes: int
    seconds: float


def _turns(seed: int) -> Iterator[tuple[list[fr.Frame], int]]:
    """One long generated stream cut into turns (a turn starts at a user prompt), with the
    bytes each turn's frames encode to."""
    encode = msgspec.json.encode
    turn: list[fr.Frame] = []
    for frame in generate_frames(10**12, seed=seed, observation_rate=0.03):
        if isinstance(frame, fr.ThreadCreated):
            continue
        starts = (
            isinstance(frame, fr.MessageAppended)
            and frame.role == "user"
            and isinstance(frame.content[0], fr.TextBlock)
        )
        if starts and turn:
            yield turn, sum(len(encode(f)) + 80 for f in turn)
            turn = []
        turn.append(frame)


def _renumbered(frames: list[fr.Frame], rng: random.Random) -> list[fr.Frame]:
    """The frames with their seqs left to the store (they keep their times); a few messages
    marked as redacted; observations pointing at a frame of this thread."""
    out: list[fr.Frame] = []
    replace = msgspec.structs.replace
    first = frames[0].seq
    for f in frames:
        if isinstance(f, fr.MessageAppended) and rng.random() < _REDACTED_RATE:
            out.append(replace(f, seq=-1, meta={**f.meta, "redacted": str(rng.randrange(1, 4))}))
        elif isinstance(f, fr.ObservationRecorded):
            source = None if f.source_seq is None else max(1, f.source_seq - first + 1)
            out.append(replace(f, seq=-1, source_seq=source))
        else:
            out.append(replace(f, seq=-1))
    return out


def _checkpoint(
    store: BaseStore, thread_id: str, frames: list[fr.Frame], rng: random.Random
) -> fr.CompactionCheckpointCreated:
    """A Claude Code ``/compact`` as the adapter records it, after the thread's messages, with
    its summary stored (a checkpoint naming an artifact the store lacks fails ``verify``)."""
    to_seq = len(frames)  # the thread's frames are seqs 1.. after thread_created
    texts = [
        b.text
        for f in frames
        if isinstance(f, fr.MessageAppended) and f.role == "user"
        for b in f.content
        if isinstance(b, fr.TextBlock)
    ]
    doc = SummaryDoc(
        thread_id=thread_id,
        to_seq=to_seq,
        produced_by="claude-code",
        text="Summary of the session so far.\n" + "\n".join(f"- {t[:120]}" for t in texts[:8]),
    )
    return fr.CompactionCheckpointCreated(
        checkpoint_id=f"cc-{rng.getrandbits(128):032x}",
        cut_rule_id=rng.choice(("claude_code_compact/auto", "claude_code_compact/manual")),
        summary_kind=CUMULATIVE_V1,
        summary_artifact_id=store.artifacts.put(summary_bytes(doc)),
        from_seq=0,
        to_seq=to_seq,
        produced_by="claude-code",
        ts_ms=frames[-1].ts_ms + 1_000,
    )


def write_threads(
    store: BaseStore,
    n_threads: int,
    *,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> ThreadsStats:
    """Append ``n_threads`` new threads to ``store``, each in one batch (no fsync)."""
    started = time.perf_counter()
    rng = random.Random(f"threads:{seed}")
    turns = _turns(seed)
    sessions: list[tuple[str, str, str]] = []  # (thread id, project, branch) of recent sessions
    frames_written = 0
    for i in range(n_threads):
        session = f"{rng.getrandbits(128):032x}"
        if sessions and rng.random() < _SUBAGENT_RATE:
            parent, project, branch = rng.choice(sessions[-8:])
            tid = f"{parent}.agent-{rng.getrandbits(64):016x}"
            title = None
        else:
            parent = None
            project, branch = rng.choice(_PROJECTS), rng.choice(_BRANCHES)
            tid = f"cc-{session}"
            title = f"Session {i} in {project.rsplit('/', 1)[1]}"
            sessions.append((tid, project, branch))
        # Sizes spread like real sessions: most a few KB, a few tens of KB.
        budget = min(_MAX_BYTES, max(_MIN_BYTES, int(rng.lognormvariate(_MEDIAN_LOG, 0.9))))
        body: list[fr.Frame] = []
        size = 0
        while size < budget:
            turn, turn_bytes = next(turns)
            if turn_bytes > 2 * budget:
                continue  # a turn far larger than this thread is meant to be
            body.extend(turn)
            size += turn_bytes
        frames = _renumbered(body, rng)
        if rng.random() < _CHECKPOINT_RATE:
            frames.append(_checkpoint(store, tid, frames, rng))
        created = fr.ThreadCreated(
            ts_ms=frames[0].ts_ms,
            thread_id=tid,
            title=title,
            parent_thread_id=parent,
            meta={
                "source": "claude-code",
                "transcript": f"{project}/{session}.jsonl",
                "project": project,
                "git_branch": branch,
                "claude_code_version": "2.1.3",
                "session_id": session,
            },
        )
        store.thread(tid).append([created, *frames], durable=False)
        frames_written += len(frames) + 1
        if progress is not None and (i + 1) % 500 == 0:
            progress(i + 1, n_threads)
    root = store.location
    size = (
        sum(p.stat().st_size for p in (root / "threads").glob("*.jsonl"))
        if isinstance(root, Path)
        else 0
    )
    return ThreadsStats(n_threads, frames_written, size, time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, type=Path, help="store folder (created)")
    parser.add_argument("--threads", required=True, type=int, help="threads to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    store = Store(args.store, create=True, durable=False, clock=lambda: FIXED_CLOCK_MS)

    def report(done: int, total: int) -> None:
        print(f"\r{done:,}/{total:,} threads", end="", file=sys.stderr, flush=True)

    stats = write_threads(
        store, args.threads, seed=args.seed, progress=report if sys.stderr.isatty() else None
    )
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(
        f"wrote {stats.threads:,} threads ({stats.frames:,} frames, "
        f"{stats.log_bytes / 1e6:.1f} MB) to {args.store} in {stats.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
