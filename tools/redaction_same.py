"""Whether two redactors give the same output, byte for byte: a change made for speed must not
change what is redacted.

    python -m tools.redaction_same [--baseline REV] [--fixtures DIR] [--code DIR ...]

Redacts, with the default :class:`~continuity.redaction.Redactor`, every text of

* the large corpus (``tools/redaction_formats.py``: every format planted in every context),
  the small one (``tools/redaction_corpus.py``: its samples and its benign lines) and the
  benchmark's texts (``tools/bench/bench_redaction.py``);
* the fixture transcripts of ``../shared/fixtures`` (every string of every JSON line, as
  ``redaction_quality`` reads them, and every JSON line whole through
  :meth:`~continuity.redaction.Redactor.redact_json`);
* the source files under ``--code`` (this repository's ``continuity``, ``tools`` and ``tests``
  by default: the tests hold many made-up secrets), each whole and line by line;

once with each gate the redactor has (the keywords looked for one by one, and RE2's ``Set``
when ``google-re2`` is installed), and, with ``--baseline REV``, with a git revision's
``continuity/`` too (extracted with ``git archive``, run in a child process on the same texts).
Prints how many texts, how many differ (the first few of them), and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
FIXTURES: Final = (ROOT / ".." / "shared" / "fixtures").resolve()
_CODE_SUFFIXES: Final = (".py", ".md", ".toml", ".json", ".jsonl", ".txt", ".yaml", ".yml")


def texts(fixtures: Path | None, code: list[Path]) -> Iterator[str]:
    """Every text the check redacts, in a fixed order."""
    from tools import redaction_corpus, redaction_formats
    from tools.bench import bench_redaction as bench
    from tools.redaction_quality import FIXTURE_SETS, _documents, _strings

    for p in redaction_formats.planted():
        yield p.text
    for s in redaction_corpus.SAMPLES:
        yield s.text
    yield from redaction_corpus.BENIGN
    message, output = bench.message_text(), bench.tool_output()
    yield from (message, output, bench.with_secret(message), bench.with_secret(output))
    if fixtures is not None:
        for name in FIXTURE_SETS:
            for path in sorted((fixtures / name).rglob("*")):
                if path.suffix in (".jsonl", ".json"):
                    for doc in _documents(path):
                        yield from _strings(doc, None, {})
    for root in code:
        for path in sorted(root.rglob("*")):
            if path.suffix in _CODE_SUFFIXES and path.is_file():
                source = path.read_text("utf-8", "surrogateescape")
                yield source
                yield from source.splitlines()


def documents(fixtures: Path | None) -> Iterator[Any]:
    """The fixtures' JSON lines, for :meth:`Redactor.redact_json`."""
    from tools.redaction_quality import FIXTURE_SETS, _documents

    if fixtures is None:
        return
    for name in FIXTURE_SETS:
        for path in sorted((fixtures / name).rglob("*.jsonl")):
            for doc in _documents(path):
                if isinstance(doc, dict | list):
                    yield doc


def outputs(fixtures: Path | None, code: list[Path], gate: str | None) -> list[str]:
    """A digest of each redacted text (and of each redacted JSON line), in order. ``gate``
    forces one of the redactor's gates (None: the one it picks)."""
    from continuity.redaction import Redactor

    redactor = Redactor()
    if gate is not None:
        redactor._gate_kind = gate  # the check compares the gates
    out: list[str] = []
    for text in texts(fixtures, code):
        redacted, n = redactor.redact_text(text)
        out.append(_digest(f"{n}\0{redacted}"))
    for doc in documents(fixtures):
        value, n = redactor.redact_json(doc)
        out.append(_digest(f"{n}\0{json.dumps(value, sort_keys=True, ensure_ascii=False)}"))
    return out


def _digest(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _gates() -> list[str]:
    from continuity import redaction

    return list(redaction._gates())


def _baseline(rev: str, fixtures: Path | None, code: list[Path]) -> list[str]:
    """:func:`outputs` with ``rev``'s ``continuity/`` (this tree's tools and corpora)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "continuity"], capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory(prefix="redaction-same-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        os.symlink(ROOT / "tools", Path(tmp) / "tools")
        code_arg = ",".join(str(c) for c in code)
        script = (
            "import json, sys; from pathlib import Path; from tools.redaction_same import outputs;"
            f"f = {str(fixtures) if fixtures else ''!r};"
            f"c = [Path(p) for p in {code_arg!r}.split(',') if p];"
            "json.dump(outputs(Path(f) if f else None, c, None), sys.stdout)"
        )
        env = {**os.environ, "PYTHONPATH": tmp}
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
        )
    result: list[str] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="a git revision to compare with")
    parser.add_argument("--fixtures", type=Path, default=FIXTURES, help="../shared/fixtures")
    parser.add_argument("--code", type=Path, action="append", help="source folders to redact")
    args = parser.parse_args(argv)
    fixtures = args.fixtures if args.fixtures.is_dir() else None
    if fixtures is None:
        print(f"fixtures: not found at {args.fixtures} (left out)")
    code = args.code or [ROOT / "continuity", ROOT / "tools", ROOT / "tests"]
    runs = {f"gate {g}": outputs(fixtures, code, g) for g in _gates()}
    if args.baseline:
        runs = {args.baseline: _baseline(args.baseline, fixtures, code), **runs}
    names = list(runs)
    first = runs[names[0]]
    differ = 0
    for name in names[1:]:
        other = runs[name]
        bad = [i for i, (a, b) in enumerate(zip(first, other, strict=True)) if a != b]
        differ += len(bad)
        print(f"{name} against {names[0]}: {len(bad)} of {len(first)} outputs differ {bad[:10]}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
