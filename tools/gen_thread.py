"""Generate realistic coding-agent threads, deterministically from a seed.

    python tools/gen_thread.py --store PATH --thread T --frames N --seed S [--checkpoint-every M]

The stream has the shape of a Claude Code session: a user prompt, then assistant turns with text,
thinking and ``tool_use`` blocks (Bash, Read, Edit, Grep, Write with realistic inputs), each
answered by a user message holding the matching ``tool_result`` (mostly short, some a few KB,
rarely 20-100 KB, some ``is_error``), a closing assistant reply; occasional
``observation_recorded`` frames, and optionally a ``compaction_checkpoint_created`` frame at the
first turn boundary after every ``checkpoint_every`` messages.

Everything — message and tool ids, timestamps, contents — comes from ``random.Random(seed)``, and
every frame carries its ``seq`` and ``ts_ms``, so the same arguments give byte-identical logs.

Counting: ``n_frames`` is the number of frames the thread gets. A new thread's count includes its
``thread_created`` frame at seq 0 (so ``--frames 1000`` leaves seqs 0..999); appending to an
existing thread adds exactly ``n_frames`` frames after its head (a continuation stream drawn from
the seed and the first seq, without ``thread_created``).

Given an artifact store, tool outputs larger than ``artifact_threshold`` bytes are stored as
artifacts and the frame keeps a preview, and checkpoint summaries are stored for real; without
one, large outputs stay inline and summary ids are random 64-hex strings.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from continuity import frames as fr
from continuity.store.artifacts import ArtifactStore
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store

__all__ = [
    "DEFAULT_ARTIFACT_THRESHOLD",
    "DEFAULT_PREVIEW_CHARS",
    "FIXED_CLOCK_MS",
    "WriteStats",
    "generate_frames",
    "main",
    "write_thread",
]

DEFAULT_ARTIFACT_THRESHOLD: Final = 16 * 1024
DEFAULT_PREVIEW_CHARS: Final = 1024
FIXED_CLOCK_MS: Final = 1_732_240_000_000
"""The start of every generated thread's timeline (2024-11-22), and the scripts' store clock."""

_TOOLS: Final = ("Bash", "Read", "Edit", "Grep", "Write")
_TOOL_WEIGHTS: Final = (35, 30, 15, 15, 5)
_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# Output size classes of a tool result: (weight, min bytes, max bytes).
_SIZES: Final = ((70, 40, 700), (24, 700, 4_000), (5.5, 4_000, 16_000), (0.5, 20_000, 100_000))


def _split(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_WORDS: Final = _split(
    "the test fails because the fixture opens the store before the lock is taken so the next "
    "append sees a stale head and we should read the tail again after reopening the file then "
    "check that every seq is contiguous and the digest chains over the previous frame which "
    "means the cache has to catch up from its watermark instead of rebuilding the whole index "
    "I will look at the parser first and then update the command so it prints a clear error "
    "this change keeps the public interface small while the helper moves into a private module"
)
_IDENTS: Final = _split(
    "store thread frame seq head digest cache index offset window anchor budget tokens summary "
    "checkpoint bundle artifact cursor batch line chunk reader writer config parser result "
    "session message block payload manifest limit count path data value item node"
)
_PACKAGES: Final = ("core", "storage", "api", "cli", "utils", "models", "services", "io")
_PROMPTS: Final = (
    "Fix the failing test in {path}.",
    "Add a --json flag to the `{ident}` command and document it.",
    "Why does `{ident}_{ident2}()` return None when the {ident2} is empty?",
    "Refactor {path} so the {ident} logic lives in its own module.",
    "Run the test suite and fix whatever is broken.",
    "Can you speed up `{ident}_{ident2}`? It is slow on large inputs.",
    "Review the last commit and tell me if anything looks wrong.",
    "Implement `{ident}` caching in {path}; keep the interface unchanged.",
    "The CI job fails with `KeyError: '{ident}'` — please investigate.",
    "Écris un test pour {path} — merci ✅",
    "给 {path} 加上类型注解。",
)
_BASH: Final = (
    "pytest -q {test}",
    "pytest -x -q {test} -k {ident}",
    "git status --short",
    "git diff --stat",
    "git log --oneline -n 20",
    "ls -la {dir}",
    "rg -n '{ident}_{ident2}' {dir}",
    "ruff check {dir}",
    "mypy --strict {dir}",
    "python -m {pkg}.{ident} --help",
    "wc -l {path}",
    "make lint",
)
_ERRORS: Final = (
    "Traceback (most recent call last):",
    '  File "{path}", line {n}, in {ident}_{ident2}',
    "    {ident} = self._{ident2}[{ident}]",
    "KeyError: '{ident}'",
    "FAILED {test}::test_{ident}_{ident2} - AssertionError: assert {n} == {m}",
    'error: Argument 1 to "{ident}" has incompatible type "str"; expected "int"  [arg-type]',
    "Exit code 1",
)


def _fill(template: str, rng: random.Random) -> str:
    """Fill the placeholders a template uses (``str.format`` ignores unused keywords)."""
    pkg = rng.choice(_PACKAGES)
    ident, ident2 = rng.choice(_IDENTS), rng.choice(_IDENTS)
    return template.format(
        path=f"/home/dev/project/src/app/{pkg}/{ident}.py",
        test=f"tests/test_{ident}.py",
        dir=f"src/app/{pkg}",
        pkg=pkg,
        ident=ident,
        ident2=ident2,
        n=rng.randrange(1, 900),
        m=rng.randrange(1, 900),
    )


def _code_line(rng: random.Random) -> str:
    a, b, c = rng.choice(_IDENTS), rng.choice(_IDENTS), rng.choice(_IDENTS)
    return rng.choice(
        (
            f"def {a}_{b}(self, {c}: int | None = None) -> list[str]:",
            f"    {a} = self._{b}.get({c}, {rng.randrange(100)})",
            f"    return [{a} for {a} in {b}s if {a}.{c} is not None]",
            f"class {a.title()}{b.title()}:",
            f"from app.{rng.choice(_PACKAGES)}.{a} import {b}_{c}",
            f"    if {a} is None:",
            f"        raise ValueError(f'bad {a}: {{{b}!r}}')",
            f"    # {' '.join(rng.choices(_WORDS, k=rng.randrange(4, 12)))}",
            "",
            f'    """{" ".join(rng.choices(_WORDS, k=rng.randrange(5, 14))).capitalize()}."""',
        )
    )


def _log_line(rng: random.Random) -> str:
    a, b, pkg = rng.choice(_IDENTS), rng.choice(_IDENTS), rng.choice(_PACKAGES)
    n, m = rng.randrange(1, 900), rng.randrange(100)
    return rng.choice(
        (
            f"tests/test_{a}.py::test_{a}_{b} PASSED{' ' * rng.randrange(1, 30)}[{m:>3}%]",
            f"src/app/{pkg}/{a}.py:{n}:{m}: {a}_{b} = {b}.{a}()",
            f" M src/app/{pkg}/{a}.py",
            f"{rng.getrandbits(28):07x} {' '.join(rng.choices(_WORDS, k=rng.randrange(3, 9)))}",
            f"-rw-r--r--  1 dev dev {n * 97:>6} Nov 22 10:{m % 60:02d} {a}_{b}.py",
            f"INFO {a}.{b}: processed {n * 11} items in {rng.random():.3f}s",
        )
    )


class _Pools:
    """Pre-drawn lines, so building a 100 KB output costs one ``choices`` and one ``join``."""

    def __init__(self, rng: random.Random) -> None:
        self.code = [_code_line(rng) for _ in range(600)]
        self.log = [_log_line(rng) for _ in range(600)]
        self.error = [_fill(t, rng) for t in _ERRORS for _ in range(20)]
        rng.shuffle(self.error)
        self.sentences = [_sentence(rng) for _ in range(800)]

    def text(self, rng: random.Random, lines: list[str], size: int) -> str:
        """About ``size`` characters made of runs of consecutive pool lines."""
        parts: list[str] = []
        total = 0
        while total < size:
            start = rng.randrange(len(lines))
            run = "\n".join(lines[start : start + rng.randrange(4, 64)])
            parts.append(run)
            total += len(run) + 1
        return "\n".join(parts)[:size]

    def prose(self, rng: random.Random, lo_words: int, hi_words: int) -> str:
        """A paragraph of about ``lo_words`` to ``hi_words`` words."""
        n = max(1, rng.randrange(lo_words, hi_words) // 14)
        start = rng.randrange(len(self.sentences))
        chosen = self.sentences[start : start + n]
        if len(chosen) < n:
            chosen += self.sentences[: n - len(chosen)]
        return " ".join(chosen)

    def numbered(self, rng: random.Random, size: int) -> str:
        """A file as Claude Code's Read tool shows it (``cat -n`` style)."""
        start = rng.randrange(1, 400)
        body = self.text(rng, self.code, size).split("\n")
        return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(body, start))[:size]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randrange(6, 22))).capitalize() + "."


class _Generator:
    def __init__(
        self,
        seed: int,
        thread_id: str,
        start_seq: int,
        start_ms: int,
        checkpoint_every: int | None,
        observation_rate: float,
        artifacts: ArtifactStore | None,
        artifact_threshold: int,
        preview_chars: int,
    ) -> None:
        # A continuation (start_seq > 0) draws from its own stream so it never repeats the ids of
        # the thread it continues.
        self.rng = random.Random(seed if start_seq == 0 else f"{seed}:{start_seq}")
        self.pools = _Pools(self.rng)
        self.thread_id = thread_id
        self.seq = start_seq
        self.ts = start_ms
        self.checkpoint_every = checkpoint_every
        self.observation_rate = observation_rate
        self.artifacts = artifacts
        self.artifact_threshold = artifact_threshold
        self.preview_chars = preview_chars
        self.messages_since_checkpoint = 0
        self.first_message_id: str | None = None
        self.last_message: tuple[int, str] | None = None
        self.last_checkpoint_id: str | None = None

    # -- ids and time --

    def _hex(self, bits: int) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def _tool_use_id(self) -> str:
        return "toolu_01" + "".join(self.rng.choices(_BASE62, k=22))

    def _tick(self, lo_ms: int, hi_ms: int) -> int:
        self.ts += self.rng.randrange(lo_ms, hi_ms)
        return self.ts

    def _next_seq(self) -> int:
        seq = self.seq
        self.seq += 1
        return seq

    # -- frames --

    def _message(
        self, role: fr.Role, content: list[fr.ContentBlock], ts_ms: int
    ) -> fr.MessageAppended:
        seq = self._next_seq()
        mid = self._hex(128)
        self.first_message_id = self.first_message_id or mid
        self.last_message = (seq, mid)
        self.messages_since_checkpoint += 1
        return fr.MessageAppended(
            seq=seq,
            ts_ms=ts_ms,
            message_id=mid,
            role=role,
            content=content,
            tokens=fr.estimate_message_tokens(content),
        )

    def _tool_input(self, name: str) -> dict[str, Any]:
        rng = self.rng
        path = _fill("{path}", rng)
        if name == "Bash":
            command = _fill(rng.choice(_BASH), rng)
            return {"command": command, "description": f"Run {command.split()[0]}"}
        if name == "Read":
            if rng.random() < 0.3:
                return {"file_path": path, "offset": rng.randrange(1, 500), "limit": 200}
            return {"file_path": path}
        if name == "Edit":
            old = "\n".join(rng.choices(self.pools.code, k=rng.randrange(1, 8)))
            new = "\n".join(rng.choices(self.pools.code, k=rng.randrange(1, 12)))
            return {"file_path": path, "old_string": old, "new_string": new}
        if name == "Grep":
            return {
                "pattern": f"{rng.choice(_IDENTS)}_{rng.choice(_IDENTS)}",
                "path": _fill("{dir}", rng),
                "output_mode": rng.choice(("content", "files_with_matches")),
                "-n": True,
                "glob": "*.py",
            }
        size = rng.randrange(300, 6_000)
        return {"file_path": path, "content": self.pools.text(rng, self.pools.code, size)}

    def _tool_output(self, name: str, tool_input: dict[str, Any]) -> tuple[str, bool]:
        rng, pools = self.rng, self.pools
        is_error = rng.random() < (0.08 if name == "Bash" else 0.03)
        if is_error:
            return pools.text(rng, pools.error, rng.randrange(60, 1_500)), True
        if name in ("Edit", "Write"):
            verb = "updated" if name == "Edit" else "created"
            return f"The file {tool_input['file_path']} has been {verb} successfully.", False
        weights = [w for w, _, _ in _SIZES]
        _, lo, hi = rng.choices(_SIZES, weights=weights)[0]
        size = rng.randrange(lo, hi)
        if name == "Read":
            return pools.numbered(rng, size), False
        return pools.text(rng, pools.log, size), False

    def _result_block(self, tool_use_id: str, output: str, is_error: bool) -> fr.ToolResultBlock:
        data = output.encode()
        if self.artifacts is not None and len(data) > self.artifact_threshold:
            preview = output[: self.preview_chars]
            return fr.ToolResultBlock(
                tool_use_id=tool_use_id,
                artifact_id=self.artifacts.put(data),
                preview=preview,
                size=len(data),
                is_error=is_error,
            )
        return fr.ToolResultBlock(
            tool_use_id=tool_use_id, content=output, size=len(data), is_error=is_error
        )

    def _checkpoint(self) -> fr.CompactionCheckpointCreated:
        assert self.last_message is not None
        to_seq, to_message_id = self.last_message
        summary = (
            f"Cumulative summary of seqs 0..{to_seq}.\n\n{self.pools.prose(self.rng, 80, 400)}"
        )
        # Without an artifact store, a random id stands in for the summary.
        aid = self._hex(256) if self.artifacts is None else self.artifacts.put(summary.encode())
        frame = fr.CompactionCheckpointCreated(
            seq=self._next_seq(),
            ts_ms=self._tick(1, 50),
            checkpoint_id=self._hex(128),
            cut_rule_id="every_n_messages_v1",
            summary_kind="cumulative_v1",
            summary_artifact_id=aid,
            from_seq=0,
            to_seq=to_seq,
            from_message_id=self.first_message_id,
            to_message_id=to_message_id,
            base_checkpoint_id=self.last_checkpoint_id,
            produced_by="gen_thread",
        )
        self.last_checkpoint_id = frame.checkpoint_id
        self.messages_since_checkpoint = 0
        return frame

    def stream(self) -> Iterator[fr.Frame]:
        rng = self.rng
        if self.seq == 0:
            yield fr.ThreadCreated(
                seq=self._next_seq(),
                ts_ms=self.ts,
                thread_id=self.thread_id,
                title=_fill("Work on {path}", rng),
                meta={"generator": "tools/gen_thread.py", "cwd": "/home/dev/project"},
            )
        while True:  # one user turn per iteration
            every = self.checkpoint_every
            if every and self.messages_since_checkpoint >= every and self.last_message:
                yield self._checkpoint()
            prompt = _fill(rng.choice(_PROMPTS), rng)
            if rng.random() < 0.2:
                prompt += "\n\n" + self.pools.text(rng, self.pools.error, rng.randrange(80, 600))
            yield self._message("user", [fr.TextBlock(text=prompt)], self._tick(5_000, 120_000))
            for _ in range(rng.choice((0, 1, 1, 2, 3, 3, 4, 5, 6, 8, 12))):
                blocks: list[fr.ContentBlock] = []
                if rng.random() < 0.4:
                    signature = base64.b64encode(rng.randbytes(rng.randrange(150, 450))).decode()
                    blocks.append(
                        fr.ThinkingBlock(text=self.pools.prose(rng, 20, 250), signature=signature)
                    )
                if rng.random() < 0.6:
                    blocks.append(fr.TextBlock(text=self.pools.prose(rng, 5, 40)))
                name = rng.choices(_TOOLS, weights=_TOOL_WEIGHTS)[0]
                tool_input = self._tool_input(name)
                tool_use_id = self._tool_use_id()
                blocks.append(fr.ToolUseBlock(id=tool_use_id, name=name, input=tool_input))
                yield self._message("assistant", blocks, self._tick(800, 20_000))
                output, is_error = self._tool_output(name, tool_input)
                result = self._result_block(tool_use_id, output, is_error)
                ts = self._tick(30, 30_000)
                result_seq = self.seq
                yield self._message("user", [result], ts)
                if rng.random() < self.observation_rate:
                    first = output.split("\n", 1)[0][:120]
                    yield fr.ObservationRecorded(
                        seq=self._next_seq(),
                        ts_ms=self._tick(1, 20),
                        tool_use_id=tool_use_id,
                        text=f"{name} {'failed' if is_error else 'ran'}: {first}",
                        source_seq=result_seq,
                        produced_by="gen_thread",
                    )
            reply = fr.TextBlock(text=self.pools.prose(rng, 10, 160))
            yield self._message("assistant", [reply], self._tick(800, 30_000))


def generate_frames(
    n_frames: int,
    *,
    seed: int = 0,
    thread_id: str = "gen",
    start_seq: int = 0,
    start_ms: int = FIXED_CLOCK_MS,
    checkpoint_every: int | None = None,
    observation_rate: float = 0.03,
    artifacts: ArtifactStore | None = None,
    artifact_threshold: int = DEFAULT_ARTIFACT_THRESHOLD,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
) -> Iterator[fr.Frame]:
    """Yield ``n_frames`` frames with seqs ``start_seq, start_seq + 1, …`` and their ``ts_ms``.

    With ``start_seq == 0`` the first frame is ``thread_created`` (counted in ``n_frames``). The
    stream is a prefix of the same infinite stream for every ``n_frames``; it may stop between a
    tool_use and its tool_result, as a live session can. ``start_ms`` should move forward for a
    continuation. ``artifacts``, when given, receives large outputs and checkpoint summaries.
    """
    if n_frames < 0:
        raise ValueError("n_frames must be >= 0")
    gen = _Generator(
        seed,
        thread_id,
        start_seq,
        start_ms,
        checkpoint_every,
        observation_rate,
        artifacts,
        artifact_threshold,
        preview_chars,
    )
    return itertools.islice(gen.stream(), n_frames)


@dataclass(frozen=True, slots=True)
class WriteStats:
    frames: int
    first_seq: int
    last_seq: int
    log_bytes: int
    seconds: float


def write_thread(
    store: BaseStore,
    thread_id: str,
    n_frames: int,
    *,
    seed: int = 0,
    batch_size: int = 10_000,
    durable: bool = False,
    store_artifacts: bool = True,
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> WriteStats:
    """Append ``n_frames`` generated frames to ``thread_id`` in batches of ``batch_size``.

    A new thread gets ``thread_created`` plus ``n_frames - 1`` frames; an existing one gets a
    continuation of ``n_frames`` frames after its head, with timestamps after the head's.
    ``options`` go to :func:`generate_frames` (``checkpoint_every``, ``artifact_threshold``, …).
    ``progress`` is called with (frames written, frames requested) after each batch.
    """
    started = time.perf_counter()
    thread = store.thread(thread_id)
    head = thread.head()
    start_seq = 0 if head is None else head.next_seq
    if head is not None and "start_ms" not in options:
        last = thread.tail(1)
        options["start_ms"] = (last[0].ts_ms if last else FIXED_CLOCK_MS) + 1_000
    frames = generate_frames(
        n_frames,
        seed=seed,
        thread_id=thread.id,
        start_seq=start_seq,
        artifacts=store.artifacts if store_artifacts else None,
        **options,
    )
    written = 0
    while batch := list(itertools.islice(frames, batch_size)):
        thread.append(batch, durable=durable)
        written += len(batch)
        if progress is not None:
            progress(written, n_frames)
    path = getattr(thread, "path", None)
    size = path.stat().st_size if isinstance(path, Path) else 0
    return WriteStats(
        frames=written,
        first_seq=start_seq,
        last_seq=start_seq + written - 1,
        log_bytes=size,
        seconds=time.perf_counter() - started,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, type=Path, help="store folder (created)")
    parser.add_argument("--thread", required=True, help="thread id (continued if it exists)")
    parser.add_argument("--frames", required=True, type=int, help="frames to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-every", type=int, default=None, metavar="MESSAGES")
    parser.add_argument("--batch", type=int, default=10_000, help="frames per append")
    parser.add_argument("--durable", action="store_true", help="fsync every batch")
    parser.add_argument(
        "--artifact-threshold", type=int, default=DEFAULT_ARTIFACT_THRESHOLD, metavar="BYTES"
    )
    parser.add_argument("--no-artifacts", action="store_true", help="keep large outputs inline")
    args = parser.parse_args(argv)
    store = Store(args.store, create=True, durable=args.durable, clock=lambda: FIXED_CLOCK_MS)

    def report(done: int, total: int) -> None:
        print(f"\r{done:,}/{total:,} frames", end="", file=sys.stderr, flush=True)

    stats = write_thread(
        store,
        args.thread,
        args.frames,
        seed=args.seed,
        batch_size=args.batch,
        durable=args.durable,
        store_artifacts=not args.no_artifacts,
        checkpoint_every=args.checkpoint_every,
        artifact_threshold=args.artifact_threshold,
        progress=report if sys.stderr.isatty() else None,
    )
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(
        f"wrote {stats.frames:,} frames (seqs {stats.first_seq}..{stats.last_seq}) to "
        f"{args.thread}: log {stats.log_bytes / 1e6:.1f} MB, {stats.seconds:.1f} s "
        f"({stats.frames / max(stats.seconds, 1e-9):,.0f} frames/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
