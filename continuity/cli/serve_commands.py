"""``continuity serve``: the read-only web viewer (:mod:`continuity.viewer`, ADR 0027)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from continuity.cli._common import errors, fail, need_extra, open_store

if TYPE_CHECKING:
    import socket

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: any free port), or a clear failure."""
    import socket

    try:
        family, kind, proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc}")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = "the port is in use" if exc.errno == 98 else str(exc)
        fail(f"cannot listen on {host}:{port}: {why} (choose another with --port; 0 picks one)")
    sock.set_inheritable(True)
    return sock


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on (a loopback one by default).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port (0: any free one).")
    ] = 8765,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token", help="Serve without the random token (only on a loopback address)."
        ),
    ] = False,
    poll: Annotated[
        float,
        typer.Option("--poll", min=0.05, max=60, help="Seconds between a live page's looks."),
    ] = 0.5,
) -> None:
    """A web viewer of the store: threads, checkpoints and exactly what the model saw.

    Read-only; prints the address to open (it carries a random token)."""
    import secrets

    try:
        import uvicorn

        from continuity.viewer.app import create_app
    except ImportError as exc:
        need_extra("continuity serve", "serve", exc)
    local = _loopback(host)
    if no_token and not local:
        fail("--no-token is only for a loopback --host: anyone who can reach it could read")
    store = open_store(ctx)
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    hosts = None
    if local:
        hosts = {f"{name}:{bound}" for name in ("127.0.0.1", "localhost", "[::1]", shown)}
    token = None if no_token else secrets.token_urlsafe(24)
    with errors():
        app = create_app(store, token=token, hosts=hosts, poll_seconds=poll)
    url = f"http://{shown}:{bound}/" + (f"?token={token}" if token else "")
    described = ctx.obj.described
    typer.echo(f"continuity viewer of {described} (read-only): {url}")
    typer.echo("Ctrl-C stops it.")
    sys.stdout.flush()
    config = uvicorn.Config(
        app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, access_log=False
    )
    uvicorn.Server(config).run(sockets=[sock])
