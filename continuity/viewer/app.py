"""The viewer's web app: Starlette routes that lay out :mod:`continuity.viewer.model` with
Jinja2 templates (autoescaped: a transcript holds arbitrary HTML and code), and a JSON face of
the same data under ``/api``. ADR 0027.

Read-only: only GET and HEAD are routed, and nothing a route calls appends to a log or stores
an artifact (the caches may be brought up to date, as by any reader). Every request must carry
the token (``?token=`` once, then a cookie) unless the app was made without one, and a Host
header naming the address it serves, so a page elsewhere cannot read it through the browser
(DNS rebinding). Every response forbids scripts and styles from anywhere but the app itself.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, quote_from_bytes, unquote_to_bytes, urlencode

import anyio
import jinja2
import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from continuity import frames as fr
from continuity.agents.table import agent_named, known_agent_names, known_agents
from continuity.errors import (
    AnchorNotFound,
    ArtifactCorrupt,
    ArtifactNotFound,
    ContinuityError,
    CorruptCache,
    CorruptFrame,
    InvalidLimits,
    InvalidQuery,
    InvalidThreadId,
    MessageNotFound,
    StoreUnavailable,
    ThreadNotFound,
)
from continuity.paths import describe_store
from continuity.retrieval.ranking import Hit, query_terms
from continuity.store.artifacts import is_artifact_id
from continuity.store.base import BaseStore
from continuity.viewer import model
from continuity.viewer.jobs import Busy, Job, Jobs

__all__ = ["COOKIE", "REFRESH_SECONDS", "WAIT_SECONDS", "create_app"]

_HERE: Final = Path(__file__).parent
COOKIE: Final = "continuity_viewer"
_SECURITY_HEADERS: Final = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_IMAGE_TYPES: Final = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}
_NOT_FOUND: Final = (
    ThreadNotFound,
    ArtifactNotFound,
    AnchorNotFound,
    MessageNotFound,
    LookupError,
)
_BAD_REQUEST: Final = (InvalidThreadId, InvalidQuery, InvalidLimits, ValueError)
_DAMAGED: Final = (CorruptFrame, ArtifactCorrupt, CorruptCache)
_COMPILE_FIELDS: Final = ("at", "recent", "budget", "refs", "recall")
WAIT_SECONDS: Final = 1.0
"""How long a request waits for its long job (verify, search) to end before it answers with
the job's progress (and the page asks again by itself)."""
REFRESH_SECONDS: Final = 1
"""How often a page showing a job's progress asks again."""


# --- safety: the token, the host, the headers ----------------------------------------------


class _Guard:
    """Refuses a request without the token or with a foreign Host; adds the security headers.
    A request with the right ``?token=`` gets the cookie and is sent on without it in the URL
    (so the token does not stay in the address bar or the history)."""

    def __init__(self, app: ASGIApp, token: str | None, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if self.hosts is not None and headers.get("host", "").lower() not in self.hosts:
            await self._refuse(send, 421, "this viewer does not serve that host name")
            return
        if scope["method"] not in ("GET", "HEAD"):
            await self._refuse(send, 405, "the viewer is read-only", allow=b"GET, HEAD")
            return
        if self.token is not None:
            raw_query = scope.get("query_string", b"")
            given = _token_in(raw_query)
            if given is not None and hmac.compare_digest(given, self.token.encode()):
                await self._send_on(send, _same_origin(scope, raw_query))
                return
            if not hmac.compare_digest(_cookie(headers.get("cookie", "")), self.token.encode()):
                await self._refuse(
                    send,
                    403,
                    "open the address `continuity serve` printed: it carries the token",
                )
                return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    async def _refuse(self, send: Send, status: int, text: str, allow: bytes = b"") -> None:
        body = text.encode() + b"\n"
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            *_SECURITY_HEADERS,
        ]
        if allow:
            headers.append((b"allow", allow))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _send_on(self, send: Send, where: str) -> None:
        assert self.token is not None
        cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        headers = [
            (b"location", where.encode("ascii")),
            (b"set-cookie", cookie.encode("latin-1")),
            (b"cache-control", b"no-store"),
            (b"content-length", b"0"),
            *_SECURITY_HEADERS,
        ]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


_PATH_CHARS: Final = "/%!$&'()*+,;=:@-._~"
"""What a path keeps unescaped in a Location: RFC 3986's path characters (and ``%``, so what
was escaped stays so). Anything else — a backslash, a space, CR, LF, NUL, a byte past ASCII —
is percent-escaped: the header stays ASCII, and no browser reads ``/\\host`` as another host."""
_QUERY_CHARS: Final = _PATH_CHARS + "?"


def _parts(raw_query: bytes) -> Iterator[tuple[bytes, bytes, bytes]]:
    """(name, value, the part as sent) of each ``name=value`` of a query string, unescaped as
    bytes (so no escape can fail to decode)."""
    for part in raw_query.split(b"&"):
        if part:
            name, _, value = part.partition(b"=")
            yield (
                unquote_to_bytes(name.replace(b"+", b" ")),
                unquote_to_bytes(value.replace(b"+", b" ")),
                part,
            )


def _token_in(raw_query: bytes) -> bytes | None:
    """The last ``token=`` of the query, as bytes (compared as bytes: any text may be sent)."""
    found = None
    for name, value, _part in _parts(raw_query):
        if name == b"token" and value:
            found = value
    return found


def _cookie(header: str) -> bytes:
    """The viewer's cookie among those of a Cookie header (empty when there is none, or the
    header cannot be parsed)."""
    try:
        jar = SimpleCookie(header)
    except CookieError:
        return b""
    return jar[COOKIE].value.encode("utf-8", "replace") if COOKIE in jar else b""


def _same_origin(scope: Scope, raw_query: bytes) -> str:
    """The address of this request without its token, as a path on this origin: one ``/`` in
    front (never ``//host``, which a browser reads as another host), every character outside a
    path's escaped, and the rest of the query as it was sent. A request target that is not a
    path (``http://host/…``) goes to ``/``."""
    raw = scope.get("raw_path") or scope["path"].encode("utf-8", "replace")
    path = quote_from_bytes(raw, safe=_PATH_CHARS) if raw.startswith(b"/") else "/"
    path = "/" + path.lstrip("/")
    rest = [
        quote_from_bytes(part, safe=_QUERY_CHARS)
        for name, _value, part in _parts(raw_query)
        if name != b"token"
    ]
    return path + ("?" + "&".join(rest) if rest else "")


# --- templates -------------------------------------------------------------------------------


def _url(path: str, **params: object) -> str:
    """``path`` with the given query parameters (those not None or empty)."""
    shown = [(k, str(v)) for k, v in params.items() if v is not None and v != ""]
    return path + ("?" + urlencode(shown) if shown else "")


def _ts(ts_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts_ms / 1000)) if ts_ms else "-"


def _agent(name: str) -> str:
    """An agent's display name (``Codex``) from its name (``codex``); "-" for none."""
    found = agent_named(name) if name else None
    return found.display if found is not None else name or "-"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        url=_url,
        highlight=model.highlight,
        scan_limit=model.SCAN_LIMIT,
        every_agent=[(a.name, a.display) for a in known_agents()],
    )
    env.filters.update(ts=_ts, size=_size, agent=_agent)
    return env


# --- the app ---------------------------------------------------------------------------------


def _int(request: Request, name: str, *, minimum: int = 0) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum:
        raise HTTPException(400, f"{name} must be at least {minimum}")
    return value


def _encode(value: Any) -> bytes:
    return msgspec.json.encode(value, enc_hook=_enc_hook)


def _enc_hook(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise NotImplementedError(type(value).__name__)


class _Json(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _encode(content)


class Viewer:
    def __init__(
        self, store: BaseStore, *, poll_seconds: float, jobs: Jobs, wait_seconds: float
    ) -> None:
        self.store = store
        self.env = _environment()
        self.poll_seconds = poll_seconds
        self.jobs = jobs
        self.wait_seconds = wait_seconds

    def page(self, template: str, code: int = 200, **context: Any) -> HTMLResponse:
        shown = describe_store(self.store.location) if self.store.location else "(in memory)"
        given = {"job": None, "poll": "", "every": REFRESH_SECONDS, **context}
        html = self.env.get_template(template).render(store=shown, **given)
        return HTMLResponse(html, code, headers={"cache-control": "no-store"})

    # -- long work: a job, joined by every request for the same work --

    def _job(
        self, request: Request, key: tuple[str, ...], what: str, work: Callable[[Job], Any]
    ) -> Job:
        """The job doing ``work``: the one ``?job=`` names, the one under way, or a new one;
        waited for :attr:`wait_seconds` (most work ends in that time)."""
        try:
            job = self.jobs.submit(key, what, work, job_id=request.query_params.get("job"))
        except Busy as exc:
            raise HTTPException(503, str(exc)) from None
        job.wait(self.wait_seconds)
        return job

    def _pending(self, request: Request, job: Job, template: str, **context: Any) -> Response:
        """202: the job's progress, and where to ask again (this address, naming the job)."""
        asked = [(k, v) for k, v in request.query_params.multi_items() if k != "job"]
        path = quote("/" + request.url.path.lstrip("/"))
        poll = f"{path}?{urlencode([*asked, ('job', job.id)])}"
        status = self.jobs.status(job)
        if request.url.path.startswith("/api/"):
            return _Json({**dataclasses.asdict(status), "poll": poll}, 202)
        return self.page(template, 202, job=status, poll=poll, **context)

    # -- errors --

    def error(self, request: Request, exc: Exception) -> Response:
        status, text = _status_of(exc)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": text}, status)
        return self.page("error.html", status, status=status, message=text)

    # -- pages --

    def threads(self, request: Request) -> Response:
        q = request.query_params
        every = model.thread_rows(self.store)
        rows = model.filter_rows(
            every,
            text=q.get("q", ""),
            kind=q.get("kind", ""),
            project=q.get("project", ""),
            agent=q.get("agent", ""),
        )
        kinds = sorted({r.info.kind for r in every})
        agents = sorted({r.info.agent for r in every if r.info.agent})
        projects = sorted({r.info.project for r in every if r.info.project})
        if request.url.path.startswith("/api/"):
            return _Json([_row_json(r) for r in rows])
        pages = max(1, -(-len(rows) // model.THREADS_PER_PAGE))
        number = min(_int(request, "page", minimum=1) or 1, pages)
        start = (number - 1) * model.THREADS_PER_PAGE
        return self.page(
            "threads.html",
            rows=rows[start : start + model.THREADS_PER_PAGE],
            matching=len(rows),
            number=number,
            pages=pages,
            kinds=kinds,
            projects=projects,
            agents=agents,
            q=q.get("q", ""),
            kind=q.get("kind", ""),
            agent=q.get("agent", ""),
            project=q.get("project", ""),
            total=len(every),
        )

    def search(self, request: Request) -> Response:
        q = request.query_params
        query = q.get("q", "").strip()
        thread, project = q.get("thread", "").strip(), q.get("project", "").strip()
        agent = q.get("agent", "").strip()
        form: dict[str, Any] = {"q": query, "thread": thread, "project": project, "agent": agent}
        hits: list[Hit] = []
        if query:
            query_terms(query)  # a query with nothing to search is refused now, not in a job
            if thread:
                self.store.existing_thread(thread)
            if agent and agent_named(agent) is None:
                raise InvalidQuery(f"unknown agent {agent!r}: the agents are {known_agent_names()}")
            where = (
                f" in thread {thread}" if thread else f" in project {project}" if project else ""
            )
            job = self._job(
                request,
                ("search", query, thread, project, agent),
                f"searching for {query[:80]!r}{where}",
                lambda j: model.search_hits(
                    self.store, query, thread=thread, project=project, agent=agent, tell=j.tell
                ),
            )
            if not job.finished.is_set():
                return self._pending(request, job, "search.html", hits=[], **form)
            hits = job.outcome()
        if request.url.path.startswith("/api/"):
            return _Json(hits)
        return self.page("search.html", hits=hits, **form)

    def thread(self, request: Request) -> Response:
        tid = request.path_params["thread_id"]
        page = model.timeline(
            self.store,
            tid,
            start=_int(request, "start"),
            before=_int(request, "before"),
            around=_int(request, "seq"),
        )
        if request.url.path.startswith("/api/"):
            return _Json(
                {
                    "thread": page.info,
                    "head_seq": page.head_seq,
                    "first_seq": page.first_seq,
                    "last_seq": page.last_seq,
                    "frames": page.frames,
                }
            )
        return self.page("thread.html", page=page, tid=tid)

    def frame(self, request: Request) -> Response:
        tid = request.path_params["thread_id"]
        seq = request.path_params["seq"]
        frame, stored = model.frame_at(self.store, tid, seq)
        view = model.frame_view(frame)
        blocks = []
        if isinstance(frame, fr.MessageAppended):
            blocks = [model.block_full(self.store, tid, seq, i) for i in range(len(frame.content))]
        return self.page("frame.html", tid=tid, frame=view, blocks=blocks, stored=stored)

    def block(self, request: Request) -> Response:
        p = request.path_params
        view = model.block_full(self.store, p["thread_id"], p["seq"], p["index"])
        return _Json({"body": view.body, "size": view.size, "kind": view.kind})

    def decisions(self, request: Request) -> Response:
        tid = request.path_params["thread_id"]
        rows, more = model.decision_rows(self.store, tid, before=_int(request, "before"))
        if request.url.path.startswith("/api/"):
            return _Json({"decisions": rows, "older": more})
        return self.page("decisions.html", tid=tid, rows=rows, more=more)

    def decision(self, request: Request) -> Response:
        tid = request.path_params["thread_id"]
        view = model.decision_view(self.store, tid, request.path_params["seq"])
        if request.url.path.startswith("/api/"):
            return _Json(_decision_json(view))
        return self.page("decision.html", tid=tid, view=view)

    def compile(self, request: Request) -> Response:
        tid = request.path_params["thread_id"]
        limits = model.limits_for(
            recent=_int(request, "recent", minimum=1),
            refs=_int(request, "refs"),
            budget=_int(request, "budget", minimum=1),
        )
        recall = request.query_params.get("recall", "").strip() or None
        view = model.compile_here(
            self.store, tid, anchor=_int(request, "at"), limits=limits, recall=recall
        )
        if request.url.path.startswith("/api/"):
            return _Json(_decision_json(view))
        return self.page(
            "decision.html",
            tid=tid,
            view=view,
            form={k: request.query_params.get(k, "") for k in _COMPILE_FIELDS},
        )

    def hierarchy(self, request: Request) -> Response:
        tid = request.path_params["thread_id"]
        h = model.hierarchy(self.store, tid, decision_seq=_int(request, "decision"))
        if request.url.path.startswith("/api/"):
            return _Json(h)
        return self.page("hierarchy.html", tid=tid, h=h)

    def summary(self, request: Request) -> Response:
        tid = request.path_params["thread_id"]
        aid = request.path_params["artifact_id"]
        self.store.existing_thread(tid)
        text, sections, covers = model.summary_text(self.store, _artifact(aid))
        return self.page(
            "summary.html", tid=tid, aid=aid, text=text, sections=sections, covers=covers
        )

    def verify(self, request: Request) -> Response:
        tid = request.path_params["thread_id"]
        self.store.existing_thread(tid)  # an unknown thread is refused now, not in a job
        job = self._job(
            request,
            ("verify", tid),
            f"verifying thread {tid}",
            lambda j: model.verify_thread(self.store, tid, tell=j.tell),
        )
        if not job.finished.is_set():
            return self._pending(request, job, "verify.html", tid=tid)
        found = job.outcome()
        if request.url.path.startswith("/api/"):
            return _Json(found)
        return self.page("verify.html", tid=tid, v=found)

    def integrity(self, request: Request) -> Response:
        job = self._job(
            request,
            ("integrity",),
            "verifying every thread of the store",
            lambda j: model.verify_all(self.store, tell=j.tell),
        )
        if not job.finished.is_set():
            return self._pending(request, job, "integrity.html")
        found = job.outcome()
        if request.url.path.startswith("/api/"):
            return _Json(found)
        return self.page("integrity.html", r=found)

    def artifact(self, request: Request) -> Response:
        data = model.artifact_bytes(self.store, _artifact(request.path_params["artifact_id"]))
        for magic, media in _IMAGE_TYPES.items():
            if data.startswith(magic):
                return Response(data, media_type=media, headers={"cache-control": "private"})
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return Response(
                data,
                media_type="application/octet-stream",
                headers={"content-disposition": "attachment"},
            )
        return Response(text, media_type="text/plain; charset=utf-8")

    # -- live --

    async def live(self, request: Request) -> Response:
        tid = request.path_params["thread_id"]
        after = _int(request, "after")
        resumed = request.headers.get("last-event-id", "").strip()
        if resumed.isdigit():
            after = int(resumed)
        await anyio.to_thread.run_sync(self.store.existing_thread, tid)
        start = -1 if after is None else after
        frame_macro = self.env.get_template("_frames.html").module

        async def events() -> AsyncIterator[bytes]:
            last = start
            quiet = 0.0
            yield b"retry: 1000\n\n"
            while True:
                views = await anyio.to_thread.run_sync(model.frames_after, self.store, tid, last)
                if views:
                    last = views[-1].seq
                    html = "".join(str(frame_macro.frame(v, tid)) for v in views)  # type: ignore[attr-defined]
                    data = json.dumps({"last": last, "html": html})
                    yield f"event: frames\nid: {last}\ndata: {data}\n\n".encode()
                    quiet = 0.0
                    continue
                await anyio.sleep(self.poll_seconds)
                quiet += self.poll_seconds
                if quiet >= 15:
                    yield b": still here\n\n"
                    quiet = 0.0

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )


def _artifact(aid: str) -> str:
    if not is_artifact_id(aid):
        raise HTTPException(404, f"{aid!r} is not an artifact id")
    return aid


def _row_json(row: model.ThreadRow) -> dict[str, Any]:
    shown = msgspec.structs.asdict(row.info)
    shown["quarantined"] = row.quarantined
    return shown


def _decision_json(view: model.DecisionView) -> dict[str, Any]:
    return {
        "thread_id": view.thread_id,
        "dry_run": view.dry_run,
        "decision": view.decision,
        "bundle_artifact_id": view.decision.bundle_artifact_id,
        "tokens": view.bundle.tokens,
        "budget": view.budget,
        "parts": view.parts,
        "previous_seq": view.previous_seq,
        "items": [
            {"kind": i.kind, "key": i.key, "seq": i.seq, "tokens": i.tokens, "status": i.status}
            for i in view.items
        ],
        "dropped": [{"kind": i.kind, "key": i.key, "seq": i.seq} for i in view.dropped],
        "halving": [
            {"bound": s.bound, "to_seq": s.chosen.to_seq if s.chosen else None} for s in view.steps
        ],
    }


def _status_of(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, HTTPException):
        return exc.status_code, str(exc.detail)
    if isinstance(exc, StoreUnavailable):
        return 503, str(exc)
    if isinstance(exc, _DAMAGED):
        return 500, f"{exc} (run `continuity verify` for the whole story)"
    if isinstance(exc, _NOT_FOUND):
        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        return 404, str(text)
    if isinstance(exc, _BAD_REQUEST):
        return 400, str(exc)
    if isinstance(exc, ContinuityError):
        return 500, str(exc)
    return 500, f"internal error: {type(exc).__name__}: {exc}"


def _routes(v: Viewer) -> list[Route | Mount]:
    def guarded(fn: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def run(request: Request) -> Response:
            try:
                return fn(request)
            except Exception as exc:
                return v.error(request, exc)

        return run

    pages: Iterable[tuple[str, Callable[[Request], Response]]] = (
        ("/", v.threads),
        ("/search", v.search),
        ("/t/{thread_id}", v.thread),
        ("/t/{thread_id}/f/{seq:int}", v.frame),
        ("/t/{thread_id}/f/{seq:int}/b/{index:int}", v.block),
        ("/t/{thread_id}/decisions", v.decisions),
        ("/t/{thread_id}/d/{seq:int}", v.decision),
        ("/t/{thread_id}/compile", v.compile),
        ("/t/{thread_id}/hierarchy", v.hierarchy),
        ("/t/{thread_id}/summary/{artifact_id}", v.summary),
        ("/t/{thread_id}/verify", v.verify),
        ("/a/{artifact_id}", v.artifact),
        ("/integrity", v.integrity),
        ("/api/integrity", v.integrity),
        ("/api/threads", v.threads),
        ("/api/search", v.search),
        ("/api/t/{thread_id}", v.thread),
        ("/api/t/{thread_id}/decisions", v.decisions),
        ("/api/t/{thread_id}/d/{seq:int}", v.decision),
        ("/api/t/{thread_id}/compile", v.compile),
        ("/api/t/{thread_id}/hierarchy", v.hierarchy),
        ("/api/t/{thread_id}/verify", v.verify),
    )

    async def live(request: Request) -> Response:
        try:
            return await v.live(request)
        except Exception as exc:
            return v.error(request, exc)

    routes: list[Route | Mount] = [
        Route(path, guarded(fn), methods=["GET", "HEAD"]) for path, fn in pages
    ]
    routes.append(Route("/t/{thread_id}/live", live, methods=["GET"]))
    routes.append(Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"))
    return routes


def create_app(
    store: BaseStore,
    *,
    token: str | None,
    hosts: Iterable[str] | None = None,
    poll_seconds: float = 0.5,
    workers: int = 2,
    wait_seconds: float = WAIT_SECONDS,
) -> ASGIApp:
    """The viewer of ``store``. ``token``: what every request must carry (None: nothing);
    ``hosts``: the Host header values it answers (``127.0.0.1:8765`` …; None: any);
    ``poll_seconds``: how often a live page looks for new frames; ``workers``: how many long
    jobs (verify, a search that builds an index) run at a time; ``wait_seconds``: how long a
    request waits for its job before it answers with the job's progress instead."""
    viewer = Viewer(store, poll_seconds=poll_seconds, jobs=Jobs(workers), wait_seconds=wait_seconds)
    app = Starlette(routes=_routes(viewer))

    async def not_found(request: Request, exc: Exception) -> Response:
        return viewer.error(request, exc)

    app.add_exception_handler(404, not_found)
    app.add_exception_handler(405, not_found)
    allowed = None if hosts is None else frozenset(h.lower() for h in hosts)
    return _Guard(app, token, allowed)
