"""What secret redaction costs: a message, a large tool output, a whole transcript's ingest.

    python -m tools.bench.bench_redaction [--repeat 51] [--ingest-repeat 5] [--baseline REV]
        [--json]

Measures (medians, with the p90 beside them):

* ``Redactor.redact_text`` on a typical 1 KB message (prose with a little code) and on a
  50 KB tool output (source code, test output and logs), each without a secret (the common
  case) and with one;
* ``Redactor.__call__`` on a clean 1 KB message frame (it returns the same object);
* compiling every built-in rule's pattern, which a fresh hook process pays for the rules its
  text calls for (once: they are compiled on first use);
* ``ingest_transcript`` of a real ~3 MB fixture transcript into a fresh store, with the default
  redaction and with ``redactor=None``, interleaved (needs ``../shared/fixtures``).

The texts are redacted with each gate this interpreter has (``scan``: each rule's keywords
looked for one by one; ``re2``: all at once, with the ``re2`` extra); an ingest with the gate a
fresh process picks (RE2 after its first 128 KiB). With ``--baseline REV``, the
``continuity/redaction.py`` of a git revision is loaded beside this one and every measurement
is made with both, interleaved, in the same run ("before" and "after").

Self-contained: it needs neither the thread generator nor a cached store.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from continuity import frames as fr, redaction
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.redaction import BUILTIN_RULES, Redactor
from continuity.store.jsonl import Store

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURE = (
    ROOT.parent
    / "shared"
    / "fixtures"
    / "claude-code"
    / "spotter"
    / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
)

_PROSE = (
    "I looked at the failing test. The parser drops the last line when the file has no "
    "trailing newline, so `read_records` returns one record short. I'll change the loop in "
    "`continuity/agents/claude_code/transcript.py` to yield the tail after the last newline, add a "
    "test with a file that ends mid-line, and run the suite again:\n\n"
    "```python\nfor line in data.split(b'\\n'):\n    if line:\n        yield parse(line)\n```\n\n"
)
_SOURCE = Path(__file__).read_text()
_TEST_OUTPUT = "tests/test_mod.py::test_case PASSED [ 42%]\n" * 40
_LOG = "".join(
    f"2026-11-23T10:{i % 60:02d}:00Z GET /api/items/{i} 200 {i % 17} ms\n" for i in range(400)
)
_SECRET = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"


def message_text() -> str:
    return (_PROSE * 3)[:1024]


def tool_output() -> str:
    return ((_SOURCE + _TEST_OUTPUT + _LOG) * 4)[:50_000]


def with_secret(text: str) -> str:
    middle = len(text) // 2
    return f"{text[:middle]} GITHUB_TOKEN={_SECRET} {text[middle:]}"


def _times(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _p90(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _row(name: str, samples: list[float], unit: str = "ms") -> dict[str, object]:
    scale = 1e3 if unit == "ms" else 1e6
    return {
        "metric": name,
        "unit": unit,
        "median": statistics.median(samples) * scale,
        "p90": _p90(samples) * scale,
        "runs": len(samples),
    }


def _compile_all() -> None:
    re.purge()  # the module cache would hide the cost
    for rule in BUILTIN_RULES:
        re.compile(rule.pattern, re.IGNORECASE if rule.fold and not rule.lowered else 0)


def _ingest(path: Path, redactor: object) -> float:
    folder = Path(tempfile.mkdtemp(prefix="bench-redaction-"))
    try:
        store = Store(folder / "store", create=True, durable=False)
        redaction._redacted_chars[0] = 0  # a fresh process: the gate as it would pick it
        t0 = time.perf_counter()
        ingest_transcript(store, path, final=True, redactor=redactor)  # type: ignore[arg-type]
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(folder)


def baseline_module(rev: str) -> object:
    """``continuity/redaction.py`` as it was at ``rev``, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:continuity/redaction.py"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    folder = Path(tempfile.mkdtemp(prefix="bench-redaction-base-"))
    path = folder / "redaction_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("_redaction_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _redactors(baseline: str | None) -> dict[str, Redactor]:
    out: dict[str, Redactor] = {}
    if baseline:
        out[f"{baseline}"] = baseline_module(baseline).Redactor()  # type: ignore[attr-defined]
    for gate in redaction._gates():
        r = Redactor()
        r._gate_kind = gate
        out[f"gate {gate}"] = r
    return out


def run(
    *, repeat: int = 51, ingest_repeat: int = 5, baseline: str | None = None
) -> list[dict[str, object]]:
    redactors = _redactors(baseline)
    text, output = message_text(), tool_output()
    frame = fr.message("assistant", text)
    for redactor in redactors.values():
        assert redactor.redact_text(text)[1] == redactor.redact_text(output)[1] == 0
        assert redactor(frame) is frame
    cases: list[tuple[str, str, Callable[[Redactor], object]]] = [
        ("1 KB message, no secret", "us", lambda r: r.redact_text(text)),
        ("1 KB message, one secret", "us", lambda r: r.redact_text(with_secret(text))),
        ("1 KB message frame (same object back)", "us", lambda r: r(frame)),
        ("50 KB tool output, no secret", "ms", lambda r: r.redact_text(output)),
        ("50 KB tool output, one secret", "ms", lambda r: r.redact_text(with_secret(output))),
    ]
    rows = []
    for name, unit, fn in cases:
        samples: dict[str, list[float]] = {k: [] for k in redactors}
        for _ in range(repeat):  # interleaved: the machine's load hits every redactor alike
            for key, redactor in redactors.items():
                t0 = time.perf_counter()
                fn(redactor)
                samples[key].append(time.perf_counter() - t0)
        rows += [_row(f"{name} [{key}]", s, unit) for key, s in samples.items()]
    rows.append(
        _row("compile every built-in rule (first use)", _times(_compile_all, max(5, repeat // 5)))
    )
    if FIXTURE.is_file():
        kinds: dict[str, object] = {"redactor=None": None}
        if baseline:
            kinds[baseline] = redactors[baseline]
        kinds["default redaction"] = "store"
        ingests: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(ingest_repeat):  # interleaved: the machine's load hits both alike
            for key, kind in kinds.items():
                ingests[key].append(_ingest(FIXTURE, kind))
        size = FIXTURE.stat().st_size / 1e6
        off = statistics.median(ingests["redactor=None"])
        for key, took in ingests.items():
            rows.append(_row(f"ingest {size:.1f} MB transcript, {key}", took))
            if key != "redactor=None":
                rows[-1]["vs_no_redaction"] = statistics.median(took) / off
    else:
        print(f"skipped the ingest rows: {FIXTURE} not found", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=51, help="runs per text measurement")
    parser.add_argument("--ingest-repeat", type=int, default=5, help="ingests of each kind")
    parser.add_argument("--baseline", help="a git revision's redaction.py to measure beside")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    rows = run(repeat=args.repeat, ingest_repeat=args.ingest_repeat, baseline=args.baseline)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        extra = f"  ({r['vs_no_redaction']:.2f}x)" if "vs_no_redaction" in r else ""
        print(
            f"{r['metric']:<60} median {r['median']:9.2f} {r['unit']}  "
            f"p90 {r['p90']:9.2f} {r['unit']}{extra}"
        )


if __name__ == "__main__":
    main()
