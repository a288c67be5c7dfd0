"""Redaction quality: how many secret formats are redacted, and how many redactions real sessions
and benign code lines get (false positives).

    python -m tools.redaction_quality [--baseline REV] [--json] [--fixtures DIR] [--show N]

Measures, with the default :class:`~continuity.redaction.Redactor`:

* the **redaction rate** on the corpus of ``tools/redaction_corpus.py``: the share of samples
  whose secret is gone from the redacted text, in context (a prompt or a tool output: the eleven
  formats issue 26 found stored verbatim, commands, config files, headers) and bare (each
  provider token with no key name in front), and how many of them the expected rule named;
* the **false positives** on the real sessions of ``../shared/fixtures`` (``claude-code/`` and
  ``agents/``): every string of every JSON line (or JSON file) is redacted as text, except the
  payloads redaction leaves alone (:func:`continuity.redaction.opaque`); the redactions per
  fixture file, with the first ``--show`` of them in context, so a reader can judge them;
* the redactions on the corpus's benign lines (code, commands, logs, near misses).

``--baseline REV`` measures a git revision's ``continuity/`` too (extracted with ``git archive``
and run in a child process, the same corpus and fixtures) and prints both side by side. It
reports; it does not judge: the exit status is 0 whatever the figures (the tests in
tests/redaction/test_redaction_rules.py hold the floor). Without the fixtures it says so.
"""

from __future__ import annotations

import argparse
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
FIXTURE_SETS: Final = ("claude-code", "agents")


def _strings(value: Any, key: object, parent: dict[Any, Any]) -> Iterator[str]:
    from continuity.redaction import opaque

    if isinstance(value, str):
        if not opaque(key, value, parent):
            yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, k, value)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, None, {})


def _documents(path: Path) -> Iterator[Any]:
    raw = path.read_bytes()
    if path.suffix == ".json":
        try:
            yield json.loads(raw)
        except ValueError:
            yield raw.decode("utf-8", "replace")
        return
    for line in raw.splitlines():
        try:
            yield json.loads(line)
        except ValueError:
            yield line.decode("utf-8", "replace")


def _context(out: str, at: int) -> str:
    return out[max(0, at - 60) : at + 80].replace("\n", "\\n")


def fixture_redactions(root: Path, show: int) -> dict[str, Any]:
    """Redactions per fixture file under ``root``'s sets (JSON lines and JSON files)."""
    from continuity.redaction import MARKER_PREFIX, Redactor

    redactor = Redactor()
    files: dict[str, int] = {}
    examples: list[str] = []
    chars = 0
    for name in FIXTURE_SETS:
        for path in sorted((root / name).rglob("*")):
            if path.suffix not in (".jsonl", ".json"):
                continue
            found = 0
            for doc in _documents(path):
                for text in _strings(doc, None, {}):
                    chars += len(text)
                    out, n = redactor.redact_text(text)
                    found += n
                    at = out.find(MARKER_PREFIX)
                    while n and at >= 0 and len(examples) < show:
                        examples.append(f"{path.relative_to(root)}: …{_context(out, at)}…")
                        at = out.find(MARKER_PREFIX, at + 1)
            files[str(path.relative_to(root))] = found
    return {
        "files": len(files),
        "chars": chars,
        "redactions": sum(files.values()),
        "files_with_redactions": {k: v for k, v in files.items() if v},
        "examples": examples,
    }


def measure(fixtures: Path | None, show: int) -> dict[str, Any]:
    """The figures for the ``continuity`` this process imports."""
    import continuity.redaction as redaction
    from tools.redaction_corpus import BARE, BENIGN, IN_CONTEXT

    redactor = redaction.Redactor()
    report: dict[str, Any] = {"module": redaction.__file__, "rules": len(redactor.rules)}
    for label, samples in (("in_context", IN_CONTEXT), ("bare", BARE)):
        gone = named = 0
        missed: list[str] = []
        for s in samples:
            out, _ = redactor.redact_text(s.text)
            if s.secret not in out:
                gone += 1
                named += f"{redaction.MARKER_PREFIX}{s.rule}]" in out
            else:
                missed.append(s.format)
        report[label] = {
            "formats": len(samples),
            "redacted": gone,
            "named": named,
            "missed": missed,
        }
    benign = [t for t in BENIGN if redactor.redact_text(t)[1]]
    report["benign"] = {"lines": len(BENIGN), "redacted": len(benign), "which": benign}
    if fixtures is not None and fixtures.is_dir():
        report["fixtures"] = fixture_redactions(fixtures, show)
    return report


def _baseline(rev: str, fixtures: Path | None, show: int) -> dict[str, Any]:
    """``measure`` run in a child process on ``rev``'s ``continuity/`` (this tree's corpus)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "continuity"],
        check=True,
        capture_output=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="redaction-baseline-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        code = (
            "import json; from pathlib import Path;"
            "from tools.redaction_quality import measure;"
            f"f = {str(fixtures) if fixtures else ''!r};"
            f"print(json.dumps(measure(Path(f) if f else None, {show})))"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, str(ROOT)])}
        out = subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,  # `python -c` puts the current folder first: not this tree's continuity
        ).stdout
        report: dict[str, Any] = json.loads(out)
        if not report["module"].startswith(tmp):
            raise SystemExit(f"the baseline imported {report['module']}, not {rev}'s tree")
        report["module"] = f"{rev}:continuity/redaction.py"
        return report


def _print(name: str, r: dict[str, Any]) -> None:
    print(f"== {name}: {r['module']} ({r['rules']} rules)")
    for label in ("in_context", "bare"):
        c = r[label]
        rate = 100 * c["redacted"] / c["formats"]
        print(
            f"  {label:<10} redacted {c['redacted']:>3}/{c['formats']:<3} ({rate:5.1f} %)"
            f"  named by the expected rule {c['named']}"
        )
        if c["missed"]:
            print("    missed: " + "; ".join(c["missed"]))
    b = r["benign"]
    print(f"  benign lines: {b['redacted']} of {b['lines']} redacted")
    for line in b["which"]:
        print(f"    {line}")
    f = r.get("fixtures")
    if f is None:
        print(
            f"  fixtures: not found at {FIXTURES} (false positives on real sessions not measured)"
        )
        return
    print(
        f"  fixtures: {f['redactions']} redactions in {f['files']} files "
        f"({f['chars'] / 1e6:.1f} M characters of text)"
    )
    for path, n in f["files_with_redactions"].items():
        print(f"    {n:>3}  {path}")
    for e in f["examples"]:
        print(f"    e.g. {e}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REV", help="measure this git revision too")
    parser.add_argument("--fixtures", type=Path, default=FIXTURES, help="../shared/fixtures")
    parser.add_argument("--show", type=int, default=10, help="fixture redactions to show")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    fixtures = args.fixtures if args.fixtures.is_dir() else None
    reports = {"this tree": measure(fixtures, args.show)}
    if args.baseline:
        reports = {args.baseline: _baseline(args.baseline, fixtures, args.show), **reports}
    if args.json:
        print(json.dumps(reports, indent=2))
        return
    for name, r in reports.items():
        _print(name, r)


if __name__ == "__main__":
    main()
