"""The two gates of a redactor (its rules' keywords looked for one by one, or all at once by an
RE2 ``Set``) try the same rules, so they give the same output on every text: the large corpus,
the small one, its benign lines, and the texts where the byte matching of RE2 could part from
``str`` matching (lone surrogates, non-ASCII keywords, an empty keyword, a marker that brings a
keyword in)."""

from __future__ import annotations

import pytest

from continuity import redaction
from continuity.redaction import RedactionRule, Redactor
from tools.redaction_corpus import BENIGN, SAMPLES
from tools.redaction_formats import planted


def _redactor(gate: str, **kwargs: object) -> Redactor:
    if gate == "re2":
        pytest.importorskip("re2", reason="google-re2 (the re2 extra) is not installed")
    r = Redactor(**kwargs)  # type: ignore[arg-type]
    r._gate_kind = gate
    return r


def test_the_gates_agree_on_the_corpora() -> None:
    scan, fast = _redactor("scan"), _redactor("re2")
    texts = [p.text for p in planted()] + [s.text for s in SAMPLES] + list(BENIGN)
    differ = [t for t in texts if scan.redact_text(t) != fast.redact_text(t)]
    assert differ == []
    assert sum(scan.redact_text(t)[1] for t in texts) > len(SAMPLES)  # it did redact


def test_the_gates_agree_on_odd_texts() -> None:
    rules = [
        RedactionRule("acme-token", r"äcme_[a-z0-9]{12}", keywords=["äcme_"]),
        RedactionRule("any-text", r"zz[0-9]{8}", keywords=[""]),
    ]
    scan = _redactor("scan", extra=rules)
    fast = _redactor("re2", extra=rules)
    texts = [
        "key \udcff\udc80 äcme_a1b2c3d4e5f6 then zz12345678",
        "\udcffGITHUB_TOKEN=ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8\udc80",
        "ÄCME_a1b2c3d4e5f6 acme_a1b2c3d4e5f6 äcme_",
        "Password: ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8 and the rest",  # the marker holds "token"
        "",
        "x",
        # random tokens after characters beyond ASCII (RE2 finds the runs in UTF-8 bytes)
        "naïve café → Zx9Qw3Er7Ty1Ui5Op2As8Df4Gh6Jk0LzMn3Bv7Cx \udcff -Zx9Qw3Er7Ty1Ui5Op2As8Df4Gh",
        "日本語 token: Qm8Xr2Lp9Wz4Tn7Ks3Vb6Hd1Fg5Jy0Ca",
    ]
    for text in texts:
        assert scan.redact_text(text) == fast.redact_text(text), text
    assert fast.redact_text(texts[0])[1] == 2
    assert fast.redact_text(texts[-2])[1] == 1


def test_a_process_loads_re2_only_once_it_pays(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("re2", reason="google-re2 (the re2 extra) is not installed")
    monkeypatch.setattr(redaction, "_redacted_chars", [0])
    r = Redactor()
    r.redact_text("a short message")
    assert r._sets is None
    r.redact_text("x" * redaction._RE2_AFTER_CHARS)
    assert r._sets is not None
