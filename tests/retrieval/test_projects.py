"""Project scope matches the project however its path is written (issue 44): a trailing slash,
``/./``, ``..``, a relative path, a symlink to it, and the threads of its subfolders; never a
sibling that merely shares a prefix (``/p/alpha`` is not ``/p/alphabet``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.retrieval.embedders import StaticEmbedder
from continuity.retrieval.projects import in_project, project_scope
from continuity.retrieval.search import search
from continuity.store.jsonl import Store
from tests.support.model import build_tiny_model


def _store(path: Path, projects: dict[str, str]) -> Store:
    store = Store(path, create=True, durable=False)
    for tid, project in projects.items():
        store.thread(tid).append(
            [fr.ThreadCreated(meta={"project": project}), fr.message("user", "persist the index")]
        )
    return store


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("caches", [True, False])
def test_a_project_however_written_finds_its_threads_and_its_subfolders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fused: bool, caches: bool
) -> None:
    real = tmp_path / "work" / "alpha"
    (real / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    projects = {
        "top": str(real),
        "sub": str(real / "sub"),
        "sibling": str(real) + "bet",
        "other": str(tmp_path / "work" / "beta"),
    }
    store = _store(tmp_path / "store", projects)
    if not caches:
        store = Store(tmp_path / "store", durable=False)
    embedder = StaticEmbedder(build_tiny_model(tmp_path / "tiny")) if fused else None
    monkeypatch.chdir(tmp_path / "work")
    for written in (
        str(real),
        str(real) + "/",
        str(tmp_path / "work" / "." / "alpha"),
        str(tmp_path / "work" / "beta" / ".." / "alpha"),
        "alpha",
        "./alpha/",
        str(tmp_path / "link"),
    ):
        hits = search(store, "persist index", project=written, k=10, embedder=embedder)
        assert {h.thread_id for h in hits} == {"top", "sub"}, written


def test_in_project() -> None:
    scope = project_scope("/p/alpha/")
    assert in_project("/p/alpha", scope)
    assert in_project("/p/alpha/./x/", scope)
    assert not in_project("/p/alphabet", scope)
    assert not in_project(None, scope)
    assert in_project("/p/alpha", project_scope(os.sep.join(["", "p", "x", "..", "alpha"])))
