"""Odd and hostile requests to a real ``continuity serve`` (issue 26): whatever the bytes of the
request target, the token or the cookie, the viewer answers — never a 5xx, never a dropped
connection — and every redirect it sends is a path on its own origin.

Requests are sent byte for byte over a socket (:func:`tests.support.viewer.raw_get`): an HTTP
client library would escape or refuse most of these targets before they left."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import pytest

pytest.importorskip("starlette", reason="the viewer needs the serve extra")

from continuity.store.jsonl import Store
from continuity.viewer.app import COOKIE
from tests.support.viewer import Answer, ViewerStore, build_viewer_store, raw_get, served

pytestmark = pytest.mark.slow  # one server process for the module, its store built first


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    token: str
    vs: ViewerStore

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def cookie(self) -> bytes:
        return f"{COOKIE}={self.token}".encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("viewer-hostile")
    with Store(root / "store", create=True, durable=False) as store:
        vs = build_viewer_store(store, turns=20)
    with served(root / "store", stderr=root / "serve.stderr") as (_proc, url):
        found = re.fullmatch(r"http://([\d.]+):(\d+)/\?token=(\S+)", url)
        assert found is not None, url
        yield Server(found.group(1), int(found.group(2)), found.group(3), vs)
    said = (root / "serve.stderr").read_text()
    assert "Traceback" not in said, said  # nothing went wrong inside, even where it answered


def _same_origin(server: Server, location: str) -> None:
    """A Location a browser resolves to this very origin: a path with one slash in front."""
    assert location.isascii() and location.isprintable(), location
    assert location.startswith("/"), location
    assert not location.startswith(("//", "/\\")), location
    where = urlsplit(urljoin(server.origin + "/", location))
    assert (where.scheme, where.netloc) == ("http", f"{server.host}:{server.port}"), location


def _answered(server: Server, target: bytes, cookie: bytes | None) -> Answer:
    answer = raw_get(server.host, server.port, target, cookie=cookie)
    assert answer.status < 500, (target, answer.status, answer.body[:400])
    location = answer.headers.get("location")
    if location is not None:
        _same_origin(server, location)
    return answer


def _get(server: Server, target: bytes, *, cookie: bool = True) -> Answer:
    """GET ``target`` (with the cookie or not) and, when sent on, the place it is sent to (with
    the cookie it was given): each answered, below 500, every Location on this origin."""
    answer = _answered(server, target, server.cookie if cookie else None)
    if 300 <= answer.status < 400:
        given = answer.headers.get("set-cookie", "").split(";")[0].encode() or None
        answer = _answered(server, answer.headers["location"].encode(), given or server.cookie)
    return answer


def _with_token(target: str, token: str) -> bytes:
    return (target + ("&" if "?" in target else "?") + f"token={token}").encode("latin-1")


# --- the cases the issue names ------------------------------------------------------------------


@pytest.mark.parametrize("token", ["%C3%A9", "%ff", "%00", "%E2%82%AC%0d%0a"])
def test_a_token_that_is_not_ascii_is_refused_not_a_crash(server: Server, token: str) -> None:
    answer = _get(server, f"/?token={token}".encode(), cookie=False)
    assert answer.status == 403
    assert b"carries the token" in answer.body


def test_a_path_past_latin_1_with_the_token_is_sent_on_escaped(server: Server) -> None:
    answer = _answered(server, _with_token("/t/%E2%82%AC", server.token), None)
    assert answer.status == 303
    assert answer.headers["location"] == "/t/%E2%82%AC"
    assert answer.headers["set-cookie"].startswith(f"{COOKIE}={server.token};")
    there = _get(server, b"/t/%E2%82%AC")
    assert there.status == 400
    assert b"\xe2\x82\xac" in there.body  # the error names the id it refused


@pytest.mark.parametrize(
    ("target", "location"),
    [
        ("//evil.example/", "/evil.example/"),
        ("///evil.example/x", "/evil.example/x"),
        ("/\\evil.example/", "/%5Cevil.example/"),
        ("/%5Cevil.example/", "/%5Cevil.example/"),
        ("//evil.example/?next=//evil.example", "/evil.example/?next=//evil.example"),
        ("http://evil.example/x", "/"),
        ("https://evil.example//", "/"),
    ],
)
def test_the_token_never_sends_a_browser_off_site(
    server: Server, target: str, location: str
) -> None:
    answer = _answered(server, _with_token(target, server.token), None)
    assert answer.status == 303
    assert answer.headers["location"] == location


@pytest.mark.parametrize("escape", ["%0d%0a", "%0a", "%0d", "%00", "%0d%0aSet-Cookie:%20evil=1"])
def test_control_characters_in_a_path_are_answered(server: Server, escape: str) -> None:
    sent_on = _answered(server, _with_token(f"/t/x{escape}y", server.token), None)
    assert sent_on.status == 303
    assert sent_on.headers["location"] == f"/t/x{escape}y"  # still escaped: one header
    assert "evil" not in sent_on.headers.get("set-cookie", "")
    there = _get(server, f"/t/x{escape}y".encode())
    assert there.status == 400
    assert "evil" not in there.headers.get("set-cookie", "")


# --- a sweep: hostile paths and queries, with the cookie and with the token in the query -----

_LONG = 60_000
"""A request target this long is still read whole (uvicorn refuses a head past 64 KiB)."""

HOSTILE_TARGETS = [
    # bytes that are not UTF-8, escaped
    "/%ff",
    "/%C3%28",
    "/t/%ff%fe",
    "/t/%ff/verify",
    "/api/t/%ff%00",
    "/?q=%ff&kind=%fe&project=%C3",
    "/search?q=%ff%fe&thread=%C3",
    "/search?q=caf%E9",
    # NUL, CR, LF, other control characters
    "/t/%00",
    "/t/a%00b/decisions",
    "/t/%0d%0a/compile",
    "/t/x%0aLocation:%20//evil.example/hierarchy",
    "/search?q=%00",
    "/search?q=quoting&thread=%00",
    "/?q=%0d%0a&page=%00",
    "/api/search?q=quoting&project=%0a",
    # very long
    "/" + "a" * 8_000,
    "/t/" + "b" * 4_000,
    "/t/" + "%ff" * 3_000,
    "/?q=" + "x" * _LONG,
    "/search?q=" + "quoting+" * 4_000,
    "/t/{main}?start=" + "9" * 5_000,
    # dot segments, backslashes, double slashes
    "/..",
    "/../../etc/passwd",
    "/t/..",
    "/t/.",
    "/t/%2e%2e/%2e%2e",
    "/t/..%2f..%2fthreads",
    "/static/../app.py",
    "/static/%2e%2e/%2e%2e/viewer/app.py",
    "/static/..%2f..%2fapp.py",
    "/static/%00",
    "/static/%5c..%5capp.py",
    "/a/..%2f..%2fthreads",
    "/t/a%5cb",
    "/t/a\\b",
    "/%5C%5Cevil.example/",
    "//",
    "//t//verify",
    "/t//verify",
    "/api//threads",
    "/t/{main}//verify",
    # unknown thread ids with odd characters, on every route under /t/
    "/t/%E2%82%AC",
    "/t/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    "/t/a'b%22c",
    "/t/CON",
    "/t/-",
    "/t/" + "x" * 300,
    "/t/nope/f/1",
    "/t/nope/f/1/b/2",
    "/t/nope/d/3",
    "/t/nope/decisions",
    "/t/nope/compile",
    "/t/nope/hierarchy",
    "/t/nope/summary/%00",
    "/t/nope/verify",
    "/t/nope/live",
    "/api/t/%E2%82%AC/verify",
    # odd numbers and parameters on a real thread
    "/t/{main}?start=99999999999999999999999999",
    "/t/{main}?before=-99999999999999999999",
    "/t/{main}?seq=1e9",
    "/t/{main}/f/99999999999999999999",
    "/t/{main}/f/0/b/99999999999999999999",
    "/t/{main}/d/99999999999999999999",
    "/t/{main}/decisions?before=99999999999999999999",
    "/t/{main}/hierarchy?decision=%ff",
    "/t/{main}/compile?at=99999999999999999999&budget=0&recent=-1&refs=x",
    "/t/{main}/compile?recall=%00%ff",
    "/t/{main}/compile?budget=99999999999999999999999999",
    "/t/{main}/summary/" + "0" * 64,
    "/t/{main}/summary/%ff",
    "/t/{main}/live?after=%ff",
    "/t/{main}/verify?job=%00",
    "/t/{main}/verify?job=" + "j" * 2_000,
    "/integrity?job=..%2f",
    "/search?q=quoting&job=%ff",
    "/?page=-1",
    "/?page=99999999999999999999999999",
    "/a/%00",
    "/a/" + "f" * 64,
    "/?a=1&&&=&%=%%&b",
]


@pytest.mark.parametrize("target", HOSTILE_TARGETS, ids=lambda t: t[:60])
def test_hostile_targets_with_the_cookie(server: Server, target: str) -> None:
    answer = _get(server, target.format(main=server.vs.main).encode("latin-1"))
    assert answer.status in (200, 202, 400, 403, 404, 405), answer.status


@pytest.mark.parametrize("target", HOSTILE_TARGETS, ids=lambda t: t[:60])
def test_hostile_targets_with_the_token_in_the_query(server: Server, target: str) -> None:
    sent = _with_token(target.format(main=server.vs.main), server.token)
    first = _answered(server, sent, None)
    assert first.status in (303, 400), first.status  # sent on, or a target h11 refuses
    answer = _get(server, sent, cookie=False)
    assert answer.status in (200, 202, 400, 403, 404, 405), answer.status


BAD_TOKENS = [
    "",
    "x",
    "%00",
    "%0d%0a",
    "%ff%fe",
    "%C3%A9",
    "%E2%82%AC" * 40,
    "+",
    "%20",
    "a" * 10_000,
    "{token}x",
    "{token}%00",
    "%20{token}",
    "{token_upper}",
    "{token_short}",
    "{token_short}&token=%ff",
]


@pytest.mark.parametrize("shape", BAD_TOKENS)
def test_bad_tokens_of_every_shape_are_refused(server: Server, shape: str) -> None:
    token = shape.format(
        token=server.token, token_upper=server.token.upper(), token_short=server.token[:-1]
    )
    answer = _get(server, f"/t/{server.vs.main}?token={token}".encode(), cookie=False)
    assert answer.status == 403, token[:80]
    assert b"carries the token" in answer.body


@pytest.mark.parametrize(
    "cookie",
    [
        b"",
        b"=",
        b";;;==",
        COOKIE.encode() + b"=",
        COOKIE.encode() + b'="\xe9"',
        COOKIE.encode() + b"=\xff\xfe",
        COOKIE.encode() + b'="\\"',
        COOKIE.encode() + b'="\\351"',
        COOKIE.encode() + b"=" + b"c" * 8_000,
        COOKIE.encode() + b"={token}\xff",
        COOKIE.encode() + b"={token_short}",
        b"other={token}",
    ],
)
def test_bad_cookies_of_every_shape_are_refused(server: Server, cookie: bytes) -> None:
    shown = cookie.replace(b"{token}", server.token.encode()).replace(
        b"{token_short}", server.token[:-1].encode()
    )
    answer = raw_get(server.host, server.port, f"/t/{server.vs.main}".encode(), cookie=shown)
    assert answer.status == 403, shown[:80]


def test_a_quoted_cookie_is_still_the_token(server: Server) -> None:
    quoted = f'{COOKIE}="{server.token}"'.encode()
    assert raw_get(server.host, server.port, b"/", cookie=quoted).status == 200


def test_a_head_too_long_is_refused_not_dropped(server: Server) -> None:
    answer = raw_get(server.host, server.port, b"/" + b"a" * 100_000, head_only=True)
    assert answer.status == 400


def test_the_last_token_given_counts(server: Server) -> None:
    late = _answered(server, f"/?token=wrong&token={server.token}".encode(), None)
    assert late.status == 303
    early = _get(server, f"/?token={server.token}&token=wrong".encode(), cookie=False)
    assert early.status == 403


def test_the_server_still_serves_after_the_sweep(server: Server) -> None:
    answer = _get(server, f"/t/{server.vs.main}".encode())
    assert answer.status == 200
    assert f'id="f{server.vs.head}"'.encode() in answer.body
