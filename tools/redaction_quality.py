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
* the redactions on the corpus's benign lines (code, commands, logs, near misses);
* the **large corpus** of ``tools/redaction_formats.py`` (issue 40: some three hundred formats in
  every context of their kind): the share redacted per context, for the visible part and the
  held-out part apart; a sample counts as redacted when none of its fragments (every 12
  characters of a token, every line of a key) is left. Only the visible part's misses are
  listed (``--show-held-out`` lists the others too);
* with ``--code DIR`` (``--code site`` for this interpreter's site-packages), the **redactions
  per 100k lines of real code**: every source file under DIR redacted whole, as a tool output
  that printed it would be.

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


def formats_report(show_held_out: bool = False) -> dict[str, Any]:
    """The large corpus (:mod:`tools.redaction_formats`) redacted by the default redactor:
    per part (visible, held-out) and context, how many samples lost every fragment."""
    from continuity.redaction import Redactor
    from tools.redaction_formats import FORMATS, HELD_OUT, planted

    redactor = Redactor()
    parts: dict[str, dict[str, list[int]]] = {"visible": {}, "held_out": {}}
    missed: dict[str, list[str]] = {"visible": [], "held_out": []}
    for p in planted():
        part = "held_out" if p.held_out else "visible"
        out, _ = redactor.redact_text(p.text)
        ok = not any(fragment in out for fragment in p.fragments)
        counts = parts[part].setdefault(p.context, [0, 0])
        counts[0] += ok
        counts[1] += 1
        if not ok and (part == "visible" or show_held_out):
            missed[part].append(f"{p.format} [{p.kind}] in {p.context}: {_context(out, 0)}")
    formats = {(f.name, f.kind) for f in FORMATS}
    held = {(f.name, f.kind) for f in FORMATS if f.family in HELD_OUT}
    return {
        "formats": len(formats),
        "held_out_formats": len(held),
        "families": len({f.family for f in FORMATS}),
        "held_out_families": sorted(HELD_OUT),
        "contexts": {
            k: {c: {"redacted": v[0], "samples": v[1]} for c, v in d.items()}
            for k, d in parts.items()
        },
        "missed": missed,
    }


SOURCE_SUFFIXES: Final = (
    ".py",
    ".pyi",
    ".js",
    ".ts",
    ".json",
    ".toml",
    ".cfg",
    ".ini",
    ".yaml",
    ".yml",
    ".md",
    ".txt",
    ".html",
    ".c",
    ".h",
    ".pem",
)


def code_redactions(root: Path, show: int) -> dict[str, Any]:
    """Redactions per 100k lines in every source file under ``root`` (each redacted whole)."""
    from continuity.redaction import MARKER_PREFIX, Redactor

    redactor = Redactor()
    lines = redactions = files = 0
    by_rule: dict[str, int] = {}
    examples: list[str] = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        try:
            text = path.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        files += 1
        lines += text.count("\n") + 1
        out, n = redactor.redact_text(text)
        if not n:
            continue
        redactions += n
        at = out.find(MARKER_PREFIX)
        while at >= 0:
            rule = out[at + len(MARKER_PREFIX) : out.find("]", at)]
            by_rule[rule] = by_rule.get(rule, 0) + 1
            if len(examples) < show:
                examples.append(f"{path.relative_to(root)}: …{_context(out, at)}…")
            at = out.find(MARKER_PREFIX, at + 1)
    return {
        "root": str(root),
        "files": files,
        "lines": lines,
        "redactions": redactions,
        "per_100k_lines": 1e5 * redactions / max(lines, 1),
        "by_rule": dict(sorted(by_rule.items(), key=lambda kv: -kv[1])),
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


def _print_formats(r: dict[str, Any]) -> None:
    print(
        f"== large corpus: {r['formats']} formats of {r['families']} families "
        f"({r['held_out_formats']} formats held out: {len(r['held_out_families'])} families)"
    )
    for part, contexts in r["contexts"].items():
        total = sum(c["samples"] for c in contexts.values())
        done = sum(c["redacted"] for c in contexts.values())
        worst = min(100 * c["redacted"] / c["samples"] for c in contexts.values())
        print(
            f"  {part:<9} {done}/{total} ({100 * done / total:.2f} %), worst context {worst:.1f} %"
        )
        for name, c in sorted(contexts.items()):
            rate = 100 * c["redacted"] / c["samples"]
            print(f"    {name:<18} {c['redacted']:>4}/{c['samples']:<4} ({rate:6.2f} %)")
    for part, missed in r["missed"].items():
        for m in missed:
            print(f"  missed ({part}): {m}")


def _print_code(r: dict[str, Any]) -> None:
    print(
        f"== benign code: {r['redactions']} redactions in {r['lines']:,} lines of {r['files']:,} "
        f"files under {r['root']} ({r['per_100k_lines']:.2f} per 100k lines)"
    )
    for rule, n in r["by_rule"].items():
        print(f"    {n:>5}  {rule}")
    for e in r["examples"]:
        print(f"    e.g. {e}")


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
    parser.add_argument("--code", help="a folder of source code ('site': site-packages)")
    parser.add_argument("--show-held-out", action="store_true", help="list held-out misses")
    parser.add_argument("--only", choices=["formats", "code"], help="measure only this")
    args = parser.parse_args(argv)
    fixtures = args.fixtures if args.fixtures.is_dir() else None
    if args.only == "formats":
        _print_formats(formats_report(args.show_held_out))
        return
    code: Path | None = None
    if args.code:
        import sysconfig

        code = Path(sysconfig.get_paths()["purelib"] if args.code == "site" else args.code)
    if args.only == "code" and code is not None:
        _print_code(code_redactions(code, args.show))
        return
    reports = {"this tree": measure(fixtures, args.show)}
    if args.baseline:
        reports = {args.baseline: _baseline(args.baseline, fixtures, args.show), **reports}
    if args.json:
        print(json.dumps(reports, indent=2))
        return
    for name, r in reports.items():
        _print(name, r)
    _print_formats(formats_report(args.show_held_out))
    if code is not None:
        _print_code(code_redactions(code, args.show))


if __name__ == "__main__":
    main()
