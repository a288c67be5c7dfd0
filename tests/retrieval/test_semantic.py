"""Semantic search (continuity.retrieval.vectors, ADR 0033): a tiny model2vec model made here
(tests/support/model.py) whose rows put paraphrases close; the vector cache as a cache
(byte-identical rebuilds, catch-up, damage); reciprocal rank fusion; fetching a model from a
local HTTP server; the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.cli.app import app
from continuity.errors import ModelError, ThreadNotFound
from continuity.retrieval import search as retrieval, vectors
from continuity.retrieval.embedders import StaticEmbedder
from continuity.retrieval.fusion import SEMANTIC_WEIGHT, fuse, fused_hits, fused_search
from continuity.retrieval.models import MODEL_FILES, fetch_model, model_folder, resolve_model
from continuity.retrieval.vectors import FOLDER, rebuild_vectors, record_dtype, semantic_search
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from tests.support.model import build_tiny_model
from tests.support.served import serve_folder


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach the real default store or model folder."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CONTINUITY_MODELS", str(tmp_path / "models"))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "CONTINUITY_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return build_tiny_model(tmp_path / "tiny")


@pytest.fixture
def model(model_dir: Path) -> StaticEmbedder:
    return StaticEmbedder(model_dir)


class Counting:
    """An embedder that counts the texts it is given (the query and a probe included)."""

    def __init__(self, inner: StaticEmbedder) -> None:
        self.inner = inner
        self.texts = 0

    @property
    def id(self) -> str:
        return self.inner.id

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts += len(texts)
        return self.inner.embed(texts)


def fill(store: BaseStore) -> None:
    store.thread("a").append(
        [
            fr.ThreadCreated(meta={"project": "/p/alpha"}),
            fr.message("user", "we should persist it to disk"),
            fr.message("assistant", "the router will render the page"),
        ]
    )
    store.thread("b").append(
        [
            fr.ThreadCreated(meta={"project": "/p/beta"}),
            fr.message("user", "the database schema migration fails"),
            fr.ObservationRecorded(
                tool_use_id="toolu_1", text="pytest suite is failing on the sql table"
            ),
        ]
    )
    store.thread("c").append(fr.message("user", "how do we rank the search index"))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "store", create=True, durable=False)
    fill(s)
    return s


def cache_files(store: Store) -> dict[str, bytes]:
    root = store.cache_dir / FOLDER
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def keys(hits: Sequence[tuple[str, int, float]]) -> list[tuple[str, int]]:
    return [(t, s) for t, s, _c in hits]


# --- the model ---------------------------------------------------------------------------------


def test_the_tiny_model_is_a_model2vec_model(model_dir: Path, model: StaticEmbedder) -> None:
    a, b, c = model.embed(["persist", "storage", "database"])
    assert float(a @ b) > 0.95 > 0.1 > float(a @ c)
    model2vec = pytest.importorskip("model2vec", reason="the format check needs model2vec")
    texts = ["We should persist it to disk!", "schema migration", "xyzzy", ""]
    theirs = model2vec.StaticModel.from_pretrained(model_dir).encode(texts)
    np.testing.assert_allclose(model.embed(texts), theirs, rtol=1e-5, atol=1e-6)


# --- search and fusion -------------------------------------------------------------------------


def test_semantic_search_finds_a_paraphrase(store: Store, model: StaticEmbedder) -> None:
    assert retrieval.search(store, "storage") == []  # BM25: no document says "storage"
    hits = semantic_search(store, "storage", model, k=3)
    assert keys(hits)[0] == ("a", 1)
    assert hits[0][2] > 0.9
    assert all(c > 0 for _t, _s, c in hits)
    assert [c for *_k, c in hits] == sorted((c for *_k, c in hits), reverse=True)
    assert semantic_search(store, "xyzzy", model, k=3) == []  # no known token: no direction


def test_fusion_finds_a_document_bm25_alone_misses(store: Store, model: StaticEmbedder) -> None:
    bm25 = retrieval.search(store, "storage database", k=5)
    assert [(h.thread_id, h.seq) for h in bm25] == [("b", 1)]
    fused = fused_search(store, "storage database", model, bm25, 5)
    assert ("a", 1) in keys(fused)
    assert keys(fused)[0] == ("b", 1)  # in both lists: first
    scores = [s for *_k, s in fused]
    assert scores == sorted(scores, reverse=True)
    assert fused == fused_search(store, "storage database", model, bm25, 5)
    hits, new = fused_hits(store, "storage database", model, bm25, 5)
    assert [(h.thread_id, h.seq, h.score) for h in hits] == fused
    assert hits[0].snippet == bm25[0].snippet and hits[0].terms == bm25[0].terms
    found = {(h.thread_id, h.seq): h for h in new}
    assert found[("a", 1)].kind == "message" and found[("a", 1)].role == "user"
    assert found[("a", 1)].snippet == ""  # the caller makes it, as for any hit
    obs = next(h for h in hits if (h.thread_id, h.seq) == ("b", 2))
    assert obs.kind == "observation"


def test_fuse_is_reciprocal_rank_fusion_with_fixed_ties() -> None:
    a, b, c, d = ("t", 1), ("t", 2), ("u", 0), ("u", 5)
    # b: 1/11 + 1/12; a: 1/12 + 1/11... equal sums tie on the best rank (1 both), then the key
    assert fuse([[a, b], [b, a]], 10) == [a, b]
    assert fuse([[b, a], [a, b]], 10) == [a, b]
    # c only first in one list; d second in both: 2/12 > 1/11
    assert fuse([[c, d], [a, d]], 10) == [d, a, c]
    assert fuse([[c, d], [a, d]], 2) == [d, a]
    # a key repeated in a list counts once, at its first place
    assert fuse([[a, a, b]], 10) == [a, b]
    assert fuse([[d], [c]], 10, c=0) == [c, d]  # 1/1 each: the lower key
    assert fuse([], 3) == []


def test_fuse_weighs_each_list() -> None:
    """A list's weight multiplies its reciprocal ranks: a heavier list wins a tie of places
    that equal weights (the search's: SEMANTIC_WEIGHT is 1, ADR 0052) give the lower key."""
    a, b = ("t", 1), ("t", 2)
    assert fuse([[a, b], [b, a]], 2) == [a, b]  # equal weights: a tie, the lower key
    assert fuse([[a, b], [b, a]], 2, weights=(1.0, SEMANTIC_WEIGHT)) == [a, b]
    assert fuse([[a, b], [b, a]], 2, weights=(1.0, 1.5)) == [b, a]
    assert fuse([[a, b], [b, a]], 2, weights=(2.0, 1.0)) == [a, b]
    # first in BM25 only (1/(c+1)) against second in the weighted list (1.5/(c+2)): c decides
    assert fuse([[a], [("x", 0), b]], 3, c=10, weights=(1.0, 1.5)) == [("x", 0), b, a]
    assert fuse([[a], [("x", 0), b]], 3, c=60, weights=(1.0, 1.0)) == [a, ("x", 0), b]
    with pytest.raises(ValueError, match="1 weights for 2 lists"):
        fuse([[a], [b]], 2, weights=(1.0,))


def test_project_and_thread_filters(store: Store, model: StaticEmbedder) -> None:
    everywhere = keys(semantic_search(store, "storage sql", model, k=10))
    assert {t for t, _s in everywhere[:3]} >= {"a", "b"}
    alpha = keys(semantic_search(store, "storage sql", model, k=10, project="/p/alpha"))
    assert alpha and {t for t, _s in alpha} == {"a"}
    assert alpha == [key for key in everywhere if key[0] == "a"]
    only_b = keys(semantic_search(store, "storage sql", model, k=10, thread="b"))
    assert only_b == [key for key in everywhere if key[0] == "b"]
    assert semantic_search(store, "storage", model, k=10, project="/p/none") == []
    with pytest.raises(ThreadNotFound):
        semantic_search(store, "storage", model, thread="nobody")


def test_a_store_without_caches_gives_the_same_answers(store: Store, model: StaticEmbedder) -> None:
    memory = MemoryStore()
    fill(memory)
    for query, options in (
        ("storage sql", {}),
        ("render a page", {"project": "/p/alpha"}),
        ("failing tests", {"thread": "b"}),
    ):
        assert semantic_search(memory, query, model, k=5, **options) == semantic_search(
            store, query, model, k=5, **options
        )


def test_ties_go_to_the_lower_thread_and_seq(tmp_path: Path, model: StaticEmbedder) -> None:
    s = Store(tmp_path / "ties", create=True, durable=False)
    for tid in ("z", "m", "a"):
        s.thread(tid).append([fr.message("user", "disk"), fr.message("user", "disk")])
    assert keys(semantic_search(s, "disk", model, k=4)) == [("a", 1), ("a", 2), ("m", 1), ("m", 2)]


# --- the cache -----------------------------------------------------------------------------------


def test_the_cache_is_deterministic_and_rebuilds_to_the_same_bytes(
    tmp_path: Path, store: Store, store_path: Path, model: StaticEmbedder
) -> None:
    first = semantic_search(store, "storage", model, k=5)
    files = cache_files(store)
    folder = next(iter({Path(n).parts[0] for n in files}))
    assert sorted(Path(n).name for n in files) == ["a.vec", "b.vec", "c.vec", "manifest.json"]
    assert len(files[f"{folder}/a.vec"]) == 2 * record_dtype(model.dim).itemsize
    assert rebuild_vectors(store, model) == 5
    assert cache_files(store) == files
    shutil.rmtree(store.cache_dir / FOLDER)
    assert semantic_search(store, "storage", model, k=5) == first
    assert cache_files(store) == files
    other = Store(tmp_path / "other", create=True, durable=False)
    for tid in ("c", "b", "a"):  # the same logs, copied in another order
        shutil.copy(store_path / "threads" / f"{tid}.jsonl", tmp_path / "other" / "threads")
    semantic_search(Store(tmp_path / "other", durable=False), "disk", model, k=1)
    assert cache_files(other) == files
    manifest = json.loads(files[f"{folder}/manifest.json"])
    assert manifest["model"] == model.id and manifest["dim"] == model.dim
    assert list(manifest["threads"]) == ["a", "b", "c"]


def test_a_grown_thread_is_caught_up_alone_and_equals_a_rebuild(
    store: Store, model: StaticEmbedder
) -> None:
    counting = Counting(model)
    semantic_search(store, "storage", counting, k=5)
    before = cache_files(store)
    counting.texts = 0
    store.thread("c").append(
        [fr.message("user", "save it to durable storage"), fr.message("assistant", "ok")]
    )
    hits = semantic_search(store, "fsync", counting, k=5)
    assert keys(hits)[:2] == [("c", 2), ("a", 1)]
    assert counting.texts == 1 + 2  # the query, the two new documents (probed once before)
    after = cache_files(store)
    changed = {n for n in after if after[n] != before.get(n)}
    assert {Path(n).name for n in changed} == {"c.vec", "manifest.json"}
    counting.texts = 0
    assert semantic_search(store, "fsync", counting, k=5) == hits
    assert counting.texts == 1  # current: nothing embedded but the query
    rebuild_vectors(store, model)
    assert cache_files(store) == after


def _torn(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-5])


def _garbage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[20:28] = b"\xff" * 8  # inside the first vector
    path.write_bytes(bytes(data))


def _grown(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\x00" * 7)


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("a.vec", _torn),
        ("a.vec", _garbage),
        ("a.vec", Path.unlink),
        ("b.vec", _grown),
        ("manifest.json", _torn),
        ("manifest.json", lambda p: p.write_bytes(b"\x00garbage")),
        ("manifest.json", Path.unlink),
    ],
)
def test_a_damaged_cache_is_rebuilt_never_trusted(
    store: Store, model: StaticEmbedder, name: str, damage: Callable[[Path], object]
) -> None:
    want = semantic_search(store, "storage sql", model, k=10)
    files = cache_files(store)
    (folder,) = {Path(n).parts[0] for n in files}
    damage(store.cache_dir / FOLDER / folder / name)
    assert semantic_search(store, "storage sql", model, k=10) == want
    assert cache_files(store) == files


def test_a_replaced_or_deleted_log_is_embedded_again(
    store: Store, store_path: Path, model: StaticEmbedder
) -> None:
    semantic_search(store, "storage", model, k=5)
    log = store_path / "threads" / "a.jsonl"
    log.unlink()
    assert {t for t, _s in keys(semantic_search(store, "storage render", model, k=10))} <= {
        "b",
        "c",
    }
    store.thread("a").append([fr.message("user", "the sql table"), fr.message("user", "pages")])
    hits = semantic_search(store, "database", model, k=10)
    assert hits[0][:2] == ("a", 1) and hits[0][2] > 0.9  # the new log's seq 1, not the old one
    fresh = cache_files(store)
    rebuild_vectors(store, model)
    assert cache_files(store) == fresh


def test_another_model_gets_its_own_cache(
    tmp_path: Path, store: Store, model: StaticEmbedder
) -> None:
    other = StaticEmbedder(build_tiny_model(tmp_path / "tiny2", scale=2.0))
    assert other.id != model.id
    assert keys(semantic_search(store, "disk", other, k=2)) == keys(
        semantic_search(store, "disk", model, k=2)
    )
    assert len(list((store.cache_dir / FOLDER).iterdir())) == 2


def test_import_continuity_loads_no_model_code() -> None:
    code = (
        "import sys, continuity; "
        "assert 'continuity.retrieval.vectors' not in sys.modules; "
        "assert 'continuity.retrieval.embedders' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- fetching a model ----------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(base URL, folder) of an HTTP server on localhost serving the folder."""
    root = tmp_path / "www"
    root.mkdir()
    with serve_folder(root) as url:
        yield url, root


def publish(root: Path, name: str, model_dir: Path) -> Path:
    where = root / name / "resolve" / "main"
    where.mkdir(parents=True)
    for file in MODEL_FILES:
        shutil.copy(model_dir / file, where / file)
    return where


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.slow
def test_fetch_puts_a_model_in_place(
    served: tuple[str, Path], model_dir: Path, model: StaticEmbedder, tmp_path: Path
) -> None:
    url, root = served
    publish(root, "org/tiny", model_dir)
    folder = fetch_model("org/tiny", base_url=url)
    assert folder == model_folder("org/tiny") == tmp_path / "models" / "org--tiny"
    assert leftovers(tmp_path / "models") == ["org--tiny"]  # no temporary folder left
    assert sorted(p.name for p in folder.iterdir()) == sorted(MODEL_FILES)
    assert StaticEmbedder(folder).embed(["disk"]).tolist() == model.embed(["disk"]).tolist()
    assert resolve_model("org/tiny") == folder
    with pytest.raises(ModelError, match="exists already"):
        fetch_model("org/tiny", base_url=url)
    (root / "org/tiny/resolve/main/config.json").write_text('{"normalize": false}')
    assert fetch_model("org/tiny", base_url=url, force=True) == folder
    assert json.loads((folder / "config.json").read_text()) == {"normalize": False}
    assert leftovers(tmp_path / "models") == ["org--tiny"]


@pytest.mark.slow
def test_fetch_failures_are_clear_and_leave_nothing(
    served: tuple[str, Path], model_dir: Path, tmp_path: Path
) -> None:
    url, root = served
    home = tmp_path / "models"
    with pytest.raises(ModelError, match=r"not found \(HTTP 404\)"):
        fetch_model("org/missing", base_url=url)
    assert leftovers(home) == []
    where = publish(root, "org/broken", model_dir)
    (where / "model.safetensors").write_bytes(b"<html>not a model</html>")
    with pytest.raises(ModelError, match="is not a model this can load"):
        fetch_model("org/broken", base_url=url)
    assert leftovers(home) == []
    # a failed --force keeps the model that was there
    publish(root, "org/good", model_dir)
    kept = fetch_model("org/good", base_url=url)
    (root / "org/good/resolve/main/tokenizer.json").write_text("nope")
    with pytest.raises(ModelError, match="is not a model this can load"):
        fetch_model("org/good", base_url=url, force=True)
    assert leftovers(home) == ["org--good"]
    StaticEmbedder(kept)
    with pytest.raises(ModelError, match="cannot fetch"):
        fetch_model("org/good", base_url="http://127.0.0.1:9", to=tmp_path / "x")
    assert not (tmp_path / "x").exists()
    with pytest.raises(ModelError, match="not a model name"):
        fetch_model("../etc", base_url=url)


@pytest.mark.slow
def test_model_commands(served: tuple[str, Path], model_dir: Path, model: StaticEmbedder) -> None:
    url, root = served
    publish(root, "org/tiny", model_dir)
    runner = CliRunner()
    got = runner.invoke(app, ["model", "fetch", "org/tiny", "--url", url])
    assert got.exit_code == 0, got.output
    assert "fetched org/tiny" in got.stdout
    again = runner.invoke(app, ["model", "fetch", "org/tiny", "--url", url])
    assert again.exit_code == 1 and "exists already" in again.stderr
    shown = runner.invoke(app, ["model", "show", "org/tiny"])
    assert shown.exit_code == 0, shown.output
    assert f"dim: {model.dim}" in shown.stdout and "id: static/org--tiny/" in shown.stdout
    missing = runner.invoke(app, ["model", "show"])  # the default model, never fetched
    assert missing.exit_code == 1 and "continuity model fetch" in missing.stderr
    gone = runner.invoke(app, ["model", "fetch", "org/none", "--url", url, "--to", "/tmp/x/y"])
    assert gone.exit_code == 1 and "HTTP 404" in gone.stderr


def test_search_with_a_bad_model_is_a_clear_error(tmp_path: Path, store: Store) -> None:
    runner = CliRunner()
    got = runner.invoke(
        app, ["--store", str(store.location), "search", "disk", "--model", str(tmp_path / "no")]
    )
    assert got.exit_code == 1
    assert got.stderr.startswith("error: ") and "no model" in got.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.safetensors").write_bytes(b"12345678")
    got = runner.invoke(
        app, ["--store", str(store.location), "search", "disk", "--model", str(bad)]
    )
    assert got.exit_code == 1 and got.stderr.startswith("error: ")


# --- once retrieval.search fuses (the lead's wiring) ----------------------------------------------


def test_search_fuses_a_model_end_to_end(
    store: Store, model_dir: Path, model: StaticEmbedder
) -> None:
    hits = retrieval.search(store, "storage database", k=5, embedder=model)
    assert [(h.thread_id, h.seq) for h in hits][:2] == [("b", 1), ("a", 1)]
    assert all(h.snippet for h in hits)
    runner = CliRunner()
    got = runner.invoke(
        app,
        ["--store", str(store.location), "search", "storage database", "--json"],
        env={"CONTINUITY_MODEL": str(model_dir)},
    )
    assert got.exit_code == 0, got.output
    lines = [json.loads(line) for line in got.stdout.splitlines()]
    assert [(h["thread_id"], h["seq"]) for h in lines][:2] == [("b", 1), ("a", 1)]


def test_a_first_fused_search_reports_its_embedding_and_a_current_cache_reports_nothing(
    store: Store, model: StaticEmbedder
) -> None:
    """Embedding every document is the slow part of a first `--model` search: its progress
    (documents embedded, documents to embed) goes to the embedding's callback, not the search
    index's; a later search with the cache current says nothing, and a grown thread's new
    document is the only one embedded again."""
    retrieval.search(store, "storage database", k=3, embedder=model)  # both indexes made
    assert store.cache_dir is not None
    documents = sum(
        len(p.read_bytes()) // record_dtype(model.dim).itemsize
        for p in (store.cache_dir / "vectors").rglob("*.vec")
    )
    for p in (store.cache_dir / "vectors").rglob("*"):
        if p.is_file():
            p.unlink()  # the vector cache gone: every thread embedded again
    heard: list[tuple[int, int]] = []
    threads_heard: list[tuple[int, int]] = []

    def hear(done: int, total: int) -> None:
        heard.append((done, total))

    how = retrieval.Embedding(progress=hear)
    retrieval.search(
        store,
        "storage database",
        k=3,
        embedder=model,
        embedding=how,
        progress=lambda d, t: threads_heard.append((d, t)),
    )
    assert heard and heard[-1] == (documents, documents)
    assert all(t == documents for _d, t in heard)
    assert [d for d, _t in heard] == sorted({d for d, _t in heard})  # it only goes forward
    assert threads_heard == []  # the search index was current
    heard.clear()
    retrieval.search(store, "storage database", k=3, embedder=model, embedding=how)
    assert heard == []
    store.thread("c").append(fr.message("user", "the sql storage grew"))
    retrieval.search(store, "storage database", k=3, embedder=model, embedding=how)
    assert heard == [(0, 1), (1, 1)]


@pytest.mark.parametrize("damage", [_torn, _garbage, Path.unlink, _grown])
def test_records_held_in_the_process_are_not_trusted_once_their_file_changes(
    store: Store,
    model: StaticEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    damage: Callable[[Path], object],
) -> None:
    # Every file counts as settled: the records read are held, and the next search takes them
    # from memory while the file's stat is unchanged (issue 44); a changed file is read again.
    monkeypatch.setattr(vectors, "_RACY_NS", -(10**18))
    want = semantic_search(store, "storage sql", model, k=10)
    assert semantic_search(store, "storage sql", model, k=10) == want  # from what is held
    files = cache_files(store)
    (folder,) = {Path(n).parts[0] for n in files}
    damage(store.cache_dir / FOLDER / folder / "a.vec")
    assert semantic_search(store, "storage sql", model, k=10) == want
    assert cache_files(store) == files  # the damaged file was embedded again, not skipped
