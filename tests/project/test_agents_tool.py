"""tools/agents.py: a pinned client already in the cache is used as it is (no npm), a folder of
another version or a partial install is not, and without npm the install says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import agents

PIN = agents.NpmPin("fake-client", "@example/fake-client", "1.2.3", "fake")


def _seed(base: Path, version: str) -> Path:
    """An install of ``PIN``'s package at ``version`` as npm lays it out."""
    prefix = base / PIN.folder
    package = prefix / "node_modules" / "@example" / "fake-client"
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": PIN.package, "version": version}))
    exe = prefix / "node_modules" / ".bin" / "fake"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    return exe


def test_a_cached_client_is_used_without_npm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = _seed(tmp_path, "1.2.3")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert agents.install_pin(PIN, tmp_path) == exe
    assert agents.install_pin(PIN, tmp_path) == exe


def test_another_version_in_the_folder_is_not_taken_and_no_npm_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(tmp_path, "1.2.2")
    assert agents.executable(PIN, tmp_path) is None
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(agents.Unavailable, match="npm is not installed"):
        agents.install_pin(PIN, tmp_path)
    assert not list(tmp_path.glob(".install-*"))  # nothing half-made is left


def test_the_pins_name_real_packages_and_their_executables() -> None:
    assert agents.PINS["claude-code"].package == "@anthropic-ai/claude-code"
    assert agents.PINS["inspector"].package == "@modelcontextprotocol/inspector"
    folders = {p.folder for p in agents.PINS.values()}
    assert len(folders) == len(agents.PINS)
    with pytest.raises(agents.Unavailable, match="no pinned client"):
        agents.pin_of("nope")
