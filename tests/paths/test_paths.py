"""Naming a store (``continuity.paths``): a folder or a server URL, from ``--store`` or
``$CONTINUITY_HOME``; how a URL is shown (never its password); the local folder a server store
gets on this machine. Opening a location: ``tests/store/test_location.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from continuity.paths import (
    default_store_location,
    describe_store,
    is_postgres_url,
    is_store_url,
    local_dir_of,
    resolve_store_location,
    url_scheme,
)


@pytest.mark.parametrize(
    ("text", "scheme"),
    [
        ("postgresql://u@h/db", "postgresql"),
        ("postgres://h/db", "postgres"),
        ("POSTGRESQL://h/db", "postgresql"),
        ("postgresql:///db?host=/tmp/sock", "postgresql"),
        ("/var/lib/continuity", None),
        ("postgresql", None),  # a folder that happens to have the name
        ("./postgresql://x", None),
        ("postgresql:/x", None),
        ("sqlite://x", "sqlite"),  # a URL: whether a backend opens it is open_store's question
        ("my-store+v2.x://bucket/key", "my-store+v2.x"),
        ("file:///var/lib/continuity", "file"),  # not a folder: ADR 0047
        ("2fa://x", None),  # a scheme starts with a letter
        ("a b://x", None),
        ("://x", None),
        ("", None),
    ],
)
def test_what_counts_as_a_store_url(text: str, scheme: str | None) -> None:
    assert url_scheme(text) == scheme
    assert is_store_url(text) is (scheme is not None)
    assert is_postgres_url(text) is (scheme in ("postgresql", "postgres"))


def test_a_path_object_is_never_a_url() -> None:
    assert not is_store_url(Path("postgresql:") / "x")
    assert not is_postgres_url(Path("postgresql:") / "x")


def test_a_url_is_shown_without_its_password() -> None:
    shown = describe_store("postgresql://bob:s3cret@db.example:5432/team?sslmode=require")
    assert shown == "postgresql://bob:***@db.example:5432/team?sslmode=require"
    assert "s3cret" not in describe_store("postgresql://h/db?sslmode=require&password=s3cret")
    assert describe_store("postgresql://bob@h/db") == "postgresql://bob@h/db"
    assert describe_store(Path("/some/folder")) == "/some/folder"


def test_store_and_home_may_name_a_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    url = "postgresql://bob@db.example/team"
    assert resolve_store_location(url) == url  # as given, not made into a path
    assert resolve_store_location("rel") == Path("rel").absolute()
    monkeypatch.setenv("CONTINUITY_HOME", url)
    assert default_store_location() == url
    assert resolve_store_location(None) == url
    monkeypatch.setenv("CONTINUITY_HOME", str(tmp_path))
    assert default_store_location() == tmp_path


def test_a_server_store_has_a_local_folder_of_its_own(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path), "CONTINUITY_HOME": "postgresql://x/y"}
    one = local_dir_of("postgresql://bob:pw1@db.example:5432/team", env)
    # the same server, database and user: the same folder, whatever the password
    assert one == local_dir_of("postgresql://bob:pw2@db.example:5432/team", env)
    assert one.parent == tmp_path / "continuity" / "servers"  # $CONTINUITY_HOME is not used
    assert one.name.startswith("db.example_5432-team-")
    assert "pw1" not in str(one)
    assert one != local_dir_of("postgresql://bob@db.example:5432/other", env)
    assert local_dir_of(tmp_path / "store") == tmp_path / "store"  # a folder store: itself


def test_another_backends_url_gets_the_same_treatment(tmp_path: Path) -> None:
    """A scheme an installed backend adds is named, shown and given a local folder as a
    server's URL is (ADR 0047)."""
    url = "objstore://alice:s3cret@bucket.example/team?region=eu&password=s3cret"
    assert resolve_store_location(url) == url
    assert describe_store(url) == "objstore://alice:***@bucket.example/team?region=eu&password=***"
    local = local_dir_of(url, {"XDG_DATA_HOME": str(tmp_path)})
    assert local.parent == tmp_path / "continuity" / "servers"
    assert local.name.startswith("bucket.example-team-") and "s3cret" not in str(local)
