"""Managed PostgreSQL roles (issue 30 item 4): a schema the DBA made for a role that may not
create schemas, ``--schema`` and the URL's ``?schema=``, a SELECT-only role and a real
read-only standby serving every read command, and every refusal one line (no traceback).

The roles are real roles on the tests' server, logging in without a password (it trusts local
logins); each test's roles and schemas are dropped after it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.errors import StoreRefused
from continuity.paths import local_dir_of, split_schema, with_schema
from continuity.store.locate import open_store
from continuity.store.postgres import PostgresStore
from tests.support.pg import PgStores
from tests.support.standby import as_role, standby, wait_replayed

HELLO = '{"type": "message_appended", "role": "user", "content": [{"type": "text", "text": "hi"}]}'
READS = [
    ["threads"],
    ["sessions"],
    ["stats"],
    ["log", "t1"],
    ["compile", "t1", "--dry-run", "--format", "text"],
    ["decisions", "t1"],
    ["verify"],
    ["search", "alpha"],
]
WRITES = [
    (["append", "t1"], "nothing was written"),
    (["delete", "t1", "--yes"], ""),
    (["compile", "t1", "--format", "text"], ""),  # logs its selection
]


def cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=input)


def one_line_error(result: Result, *needles: str) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _sql(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in [n for n in os.environ if n.startswith("CONTINUITY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


class Roles:
    """Roles and schemas made for one test (or module), dropped after it."""

    def __init__(self, url: str, prefix: str) -> None:
        self.url, self.prefix = url, prefix
        self.roles: list[str] = []
        self.schemas: list[str] = []

    def role(self, name: str, *grants: str) -> str:
        role = f"{self.prefix}_{name}"
        _sql(self.url, f"DROP ROLE IF EXISTS {role}", f"CREATE ROLE {role} LOGIN")
        self.roles.append(role)
        _sql(self.url, *(g.format(role=role) for g in grants))
        return as_role(self.url, role)

    def schema(self, name: str, owner: str | None = None) -> str:
        schema = f"{self.prefix}_{name}"
        owned = f" AUTHORIZATION {owner}" if owner else ""
        _sql(self.url, f"DROP SCHEMA IF EXISTS {schema} CASCADE", f"CREATE SCHEMA {schema}{owned}")
        self.schemas.append(schema)
        return schema

    def drop(self) -> None:
        _sql(
            self.url,
            *(f"DROP SCHEMA IF EXISTS {s} CASCADE" for s in self.schemas),
            *(f"DROP OWNED BY {r}" for r in self.roles),
            *(f"DROP ROLE IF EXISTS {r}" for r in self.roles),
        )


@pytest.fixture
def roles(pg_url: str, request: pytest.FixtureRequest) -> Iterator[Roles]:
    made = Roles(pg_url, "r" + str(abs(hash(request.node.nodeid)) % 10**8))
    try:
        yield made
    finally:
        made.drop()


@pytest.mark.slow
def test_a_schema_the_dba_made_for_the_role_serves_it_without_create_on_the_database(
    roles: Roles, home: Path
) -> None:
    owner_url = roles.role("owner")
    owner = owner_url.split("://", 1)[1].split("@", 1)[0]
    assert not _privilege(
        roles.url, f"has_database_privilege('{owner}', current_database(), 'CREATE')"
    )
    schema = roles.schema("app", owner=owner)
    made = cli("--store", owner_url, "--schema", schema, "init")
    assert made.exit_code == 0, made.output
    assert cli("--store", owner_url, "append", "t", "--schema", schema, input=HELLO).exit_code == 0
    # The URL's ?schema= names the same store, for everything that takes a URL only.
    with open_store(with_schema(owner_url, schema), create=True) as store:
        assert isinstance(store, PostgresStore) and store.schema == schema
        assert [f.seq for f in store.thread("t").read()] == [0, 1]
    log = cli("--store", with_schema(owner_url, schema), "log", "t")
    assert log.exit_code == 0 and "hi" in log.stdout


def _privilege(url: str, expression: str) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT {expression}").fetchone()
    return bool(row and row[0])


@pytest.mark.slow
def test_a_role_that_may_not_make_the_schema_or_its_tables_is_told_in_one_line(
    roles: Roles, home: Path
) -> None:
    url = roles.role("plain")
    role = url.split("://", 1)[1].split("@", 1)[0]
    missing = cli("--store", url, "--schema", f"{roles.prefix}_nosuch", "init")
    one_line_error(missing, "lacks CREATE on database", f"AUTHORIZATION {role}")
    theirs = roles.schema("theirs")  # the DBA's, USAGE granted but not CREATE
    _sql(roles.url, f"GRANT USAGE ON SCHEMA {theirs} TO {role}")
    one_line_error(cli("--store", url, "--schema", theirs, "init"), "lacks CREATE on schema")
    with pytest.raises(StoreRefused, match="lacks CREATE on schema"):
        PostgresStore(url, schema=theirs, create=True)


@pytest.mark.slow
def test_the_schema_option_says_what_is_wrong_in_one_line(
    pg_url: str, home: Path, tmp_path: Path
) -> None:
    one_line_error(cli("--store", str(tmp_path), "--schema", "x", "threads"), "is a folder")
    one_line_error(cli("--store", pg_url, "--schema", "Bad-Name", "threads"), "invalid schema")
    one_line_error(cli("--store", with_schema(pg_url, "Bad"), "threads"), "invalid schema")
    with pytest.raises(ValueError, match="names schema 'a'"):
        PostgresStore(with_schema(pg_url, "a"), schema="b")


@pytest.fixture(scope="module")
def read_only(pg_url: str) -> Iterator[dict[str, str]]:
    """A store (thread t1, two messages) in a schema of its own, a SELECT-only role on it, and
    a real standby of the server: the URLs that may only read it."""
    made = Roles(pg_url, "ro")
    try:
        schema = made.schema("store")
        with PostgresStore(pg_url, schema=schema, create=True) as store:
            store.thread("t1").append(
                [fr.message("user", "hello alpha"), fr.message("assistant", "beta reply")]
            )
        reader = made.role(
            "reader",
            f"GRANT USAGE ON SCHEMA {schema} TO {{role}}",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {{role}}",
        )
        with standby(pg_url) as replica:
            wait_replayed(pg_url, replica)
            yield {
                "reader": with_schema(reader, schema),
                "standby": with_schema(replica, schema),
            }
    finally:
        made.drop()


@pytest.mark.slow
@pytest.mark.parametrize("who", ["reader", "standby"])
@pytest.mark.parametrize("command", READS)
def test_a_select_only_role_and_a_standby_serve_every_read_command(
    read_only: dict[str, str], who: str, command: list[str], home: Path
) -> None:
    done = cli("--store", read_only[who], *command)
    assert done.exit_code == 0, (done.output, done.exception)
    assert done.exception is None or isinstance(done.exception, SystemExit)


@pytest.mark.slow
@pytest.mark.parametrize("who", ["reader", "standby"])
def test_a_select_only_role_and_a_standby_export_the_store(
    read_only: dict[str, str], who: str, tmp_path: Path, home: Path
) -> None:
    done = cli("migrate", read_only[who], str(tmp_path / "copy"))
    assert done.exit_code == 0, done.output
    assert cli("--store", str(tmp_path / "copy"), "log", "t1").stdout.count("alpha") == 1


@pytest.mark.slow
@pytest.mark.parametrize("who", ["reader", "standby"])
@pytest.mark.parametrize(("command", "also"), WRITES)
def test_commands_that_write_say_why_they_cannot_in_one_line(
    read_only: dict[str, str], who: str, command: list[str], also: str, home: Path
) -> None:
    why = "permission denied for table" if who == "reader" else "is read-only"
    one_line_error(cli("--store", read_only[who], *command, input=HELLO), why, also)


@pytest.mark.slow
def test_a_refused_append_in_a_real_process_is_one_line(
    read_only: dict[str, str], home: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", read_only["reader"], "append", "t1"],
        input=HELLO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_DATA_HOME": str(home)},
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "permission denied for table threads" in lines[0], done.stderr


@pytest.mark.slow
def test_a_server_error_left_unmapped_is_still_one_line(
    pg_stores: PgStores, tmp_path: Path, home: Path
) -> None:
    store = pg_stores.open(tmp_path)
    store.thread("t").append(fr.message("user", "hello"))
    pg_stores.sql(f"DROP TABLE {store.schema}.frames")  # by hand: not the backend's doing
    url = with_schema(pg_stores.url, store.schema)
    one_line_error(cli("--store", url, "log", "t"), "frames", "does not exist")


def test_the_urls_schema_parameter_is_kept_from_libpq_and_names_a_place_of_its_own() -> None:
    url = "postgresql://u:pw@h:5/db?schema=s&sslmode=require"
    assert split_schema(url) == ("postgresql://u:pw@h:5/db?sslmode=require", "s")
    assert split_schema("postgresql://u@h/db") == ("postgresql://u@h/db", None)
    assert with_schema(url, "t") == "postgresql://u:pw@h:5/db?sslmode=require&schema=t"
    assert with_schema("postgresql://u@h/db", "t") == "postgresql://u@h/db?schema=t"
    assert local_dir_of(with_schema(url, "a")) != local_dir_of(with_schema(url, "b"))
