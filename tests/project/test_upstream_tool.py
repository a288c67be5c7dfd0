"""tools/upstream.py: the pinned sdists are checked, extracted once and in part, safely under
concurrent runs, and a fetch without the network says why instead of failing the suite."""

from __future__ import annotations

import hashlib
import io
import multiprocessing
import os
import tarfile
from pathlib import Path

import pytest

from tools import upstream


def _sdist(path: Path, top: str, *, extra: dict[str, bytes] | None = None) -> str:
    """A tar.gz like a framework's sdist at ``path``; its sha256."""
    files = {
        f"{top}/pyproject.toml": b"[tool.pytest.ini_options]\n",
        f"{top}/tests/__init__.py": b"",
        f"{top}/tests/test_x.py": b"def test_x():\n    assert True\n",
        f"{top}/fake/__init__.py": b"raise ImportError('the sdist copy must not be imported')\n",
        **(extra or {}),
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(upstream.CACHE_ENV, str(root))
    return root


def _seeded(cache: Path, tmp_path: Path) -> upstream.Pin:
    """A pin whose archive is already in the cache's sdist folder (no download needed)."""
    probe = upstream.Pin("fake-fw", "1.0", "0" * 64)
    sdist = cache / "upstream" / "sdist"
    sdist.mkdir(parents=True)
    digest = _sdist(sdist / probe.archive, probe.tree)
    return upstream.Pin("fake-fw", "1.0", digest)


def test_a_checked_sdist_is_extracted_once_with_its_tests_but_not_its_package(
    cache: Path, tmp_path: Path
) -> None:
    pin = _seeded(cache, tmp_path)
    tree = upstream.fetch_pin(pin)
    assert tree == cache / "upstream" / "src" / "fake_fw-1.0"
    assert sorted(p.name for p in tree.iterdir()) == ["pyproject.toml", "tests"]
    marker = tree / "tests" / "marker"
    marker.write_text("kept")
    assert upstream.fetch_pin(pin) == tree  # the second fetch reuses the tree as it is
    assert marker.read_text() == "kept"


@pytest.mark.slow
def test_a_cached_archive_with_another_sha256_is_fetched_again_not_used(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin = _seeded(cache, tmp_path)
    wrong = upstream.Pin(pin.name, pin.version, "f" * 64)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip may not reach any index: as without network
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nothing"))
    with pytest.raises(upstream.Unavailable, match=r"pip download fake-fw==1\.0 failed"):
        upstream.fetch_pin(wrong)
    assert not (cache / "upstream" / "src" / pin.tree).exists()


def test_a_served_archive_with_another_sha256_is_refused(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def serve(name: str, version: str, into: Path) -> Path:
        got = into / f"{name}-{version}.tar.gz"
        _sdist(got, f"{name}-{version}", extra={f"{name}-{version}/evil": b"x"})
        return got

    monkeypatch.setattr(upstream, "pip_download", serve)
    pin = upstream.Pin("other", "2.0", "a" * 64)
    with pytest.raises(upstream.Unavailable, match=r"sha256 .* but a+ is pinned"):
        upstream.fetch_pin(pin)
    assert list((cache / "upstream" / "sdist").iterdir()) == []
    assert upstream.source(pin) is None


def test_members_outside_the_tests_and_config_are_left_out() -> None:
    assert upstream.kept("lg-1/tests/conftest.py", "lg-1")
    assert upstream.kept("lg-1/pyproject.toml", "lg-1")
    assert not upstream.kept("lg-1/langgraph/__init__.py", "lg-1")
    assert not upstream.kept("lg-1/testsuite/x.py", "lg-1")
    assert not upstream.kept("other/tests/x.py", "lg-1")


def _fetch_in_child(pin: upstream.Pin, cache: str, out: multiprocessing.Queue[str]) -> None:
    os.environ[upstream.CACHE_ENV] = cache
    out.put(str(upstream.fetch_pin(pin)))


@pytest.mark.slow
def test_concurrent_fetches_agree_on_one_complete_tree(cache: Path, tmp_path: Path) -> None:
    pin = _seeded(cache, tmp_path)
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[str] = ctx.Queue()
    children = [ctx.Process(target=_fetch_in_child, args=(pin, str(cache), out)) for _ in range(4)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    trees = {out.get(timeout=5) for _ in children}
    assert trees == {str(cache / "upstream" / "src" / pin.tree)}
    assert (Path(trees.pop()) / "tests" / "test_x.py").is_file()
    assert [p.name for p in (cache / "upstream" / "src").iterdir()] == [pin.tree]


def test_the_pins_match_the_installed_frameworks() -> None:
    """The dev extra pins what tools/upstream.py pins (else their tests test another version)."""
    for name in ("langgraph", "openai-agents"):
        assert upstream.installed_mismatch(name) is None


def test_the_command_line_fails_clearly_for_an_unknown_name(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert upstream.main(["path", "nope"]) == 1
    assert "no pinned sdist named 'nope'" in capsys.readouterr().err
