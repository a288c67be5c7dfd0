"""Where the store lives when nobody says (ADR 0004), and how a store is named.

A store is named by a *location*: a folder (the embedded JSONL store) or a URL
(``scheme://…``): ``postgresql://…`` for the PostgreSQL backend (ADR 0025), another scheme for
a backend an installed package adds (ADR 0047). ``--store`` and ``$CONTINUITY_HOME`` take
either; :func:`resolve_store_location` says which, and
:func:`continuity.store.locate.open_store` opens it. Telling a URL from a folder is a look at
the text (a folder's path never holds ``://`` in practice), never a lookup: the hooks' fast
path pays nothing for it.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path

TYPE_CHECKING = False  # not typing's: the hooks' fast path imports this module (2 ms)
if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "StoreLocation",
    "default_store_location",
    "default_store_path",
    "describe_store",
    "is_postgres_url",
    "is_store_url",
    "local_dir_of",
    "models_home",
    "resolve_store_location",
    "resolve_store_path",
    "split_schema",
    "url_scheme",
    "valid_schema_name",
    "with_schema",
]

StoreLocation = Path | str
"""A store's folder (a ``Path``) or its URL (a ``str``, see :func:`is_store_url`)."""

_POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
_SCHEME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+-.")


def _home(env: Mapping[str, str]) -> Path:
    """``$HOME`` when it is absolute, else the user's home from the password database (a
    relative ``$HOME`` would put the store wherever the command happens to run)."""
    home = env.get("HOME")
    if home and Path(home).is_absolute():
        return Path(home)
    return Path(pwd.getpwuid(os.getuid()).pw_dir)


def default_store_path(env: Mapping[str, str] | None = None) -> Path:
    """``$CONTINUITY_HOME``, else ``$XDG_DATA_HOME/continuity``, else
    ``~/.local/share/continuity`` — always absolute, never relative to the current directory.

    ``env`` defaults to :data:`os.environ`; the fallback reads ``HOME`` from it too.
    """
    env = os.environ if env is None else env
    explicit = env.get("CONTINUITY_HOME")
    if explicit:
        # The user named this folder, as with --store: a relative one means the current directory.
        return Path(explicit).expanduser().absolute()
    xdg = env.get("XDG_DATA_HOME")
    # The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    if xdg and Path(xdg).expanduser().is_absolute():
        return Path(xdg).expanduser() / "continuity"
    return _home(env) / ".local" / "share" / "continuity"


def resolve_store_path(explicit: str | os.PathLike[str] | None) -> Path:
    """The ``--store`` option when given (made absolute), else :func:`default_store_path`."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser().absolute()
    return default_store_path()


def url_scheme(text: object) -> str | None:
    """The scheme of a store's URL, in lower case (``postgresql`` for ``PostgreSQL://h/db``),
    or None when ``text`` is no URL: a ``Path``, or a string that does not start with a scheme
    (a letter, then letters, digits, ``+``, ``-`` or ``.``, RFC 3986) and ``://``."""
    if not isinstance(text, str):
        return None
    scheme, sep, _ = text.partition("://")
    scheme = scheme.lower()
    if not sep or not scheme[:1].isalpha() or not _SCHEME_CHARS.issuperset(scheme):
        return None
    return scheme


def is_store_url(text: object) -> bool:
    """Whether ``text`` names a store by URL (``postgresql://…``, or a scheme a backend adds)
    rather than a folder. Whether a backend opens that scheme is
    :func:`~continuity.store.locate.open_store`'s question."""
    return url_scheme(text) is not None


def is_postgres_url(text: object) -> bool:
    """Whether ``text`` names a PostgreSQL store (``postgresql://…`` or ``postgres://…``): what
    is PostgreSQL's own (the ``schema`` parameter, a hook's probe of a sick server) applies to
    these URLs alone."""
    return isinstance(text, str) and text.lower().startswith(_POSTGRES_SCHEMES)


def default_store_location(env: Mapping[str, str] | None = None) -> StoreLocation:
    """``$CONTINUITY_HOME`` when it is a URL, else :func:`default_store_path`."""
    env = os.environ if env is None else env
    explicit = env.get("CONTINUITY_HOME")
    if explicit and is_store_url(explicit):
        return explicit
    return default_store_path(env)


def resolve_store_location(explicit: str | os.PathLike[str] | None) -> StoreLocation:
    """The ``--store`` option when given (a URL as it is, a folder made absolute), else
    :func:`default_store_location`."""
    if explicit is not None and str(explicit) != "":
        if is_store_url(explicit):
            return str(explicit)
        return Path(explicit).expanduser().absolute()
    return default_store_location()


def describe_store(location: StoreLocation | os.PathLike[str]) -> str:
    """The location as messages show it: a folder as it is, a URL without its password."""
    if not is_store_url(location):
        return str(location)
    text = str(location)
    scheme, _, rest = text.partition("://")
    netloc, sep, tail = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = userinfo.split(":", 1)[0] + ":***@" + hostport
    # a password may also come as a query parameter
    tail = _mask_query_password(tail)
    return f"{scheme}://{netloc}{sep}{tail}"


def _mask_query_password(tail: str) -> str:
    path, q, query = tail.partition("?")
    if not q:
        return tail
    parts = [
        (p.split("=", 1)[0] + "=***") if p.lower().startswith("password=") else p
        for p in query.split("&")
    ]
    return f"{path}?{'&'.join(parts)}"


def valid_schema_name(name: str) -> bool:
    """Whether ``name`` may name a store's schema: a plain lower-case SQL identifier (the
    backend puts it into SQL unquoted)."""
    import re

    return re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name) is not None


def split_schema(url: str) -> tuple[str, str | None]:
    """A PostgreSQL store URL's ``schema`` query parameter (the store's schema, continuity's
    own: libpq does not know it) and the URL without it, for libpq. ``(url, None)`` when it
    has none."""
    base, q, query = url.partition("?")
    if not q:
        return url, None
    from urllib.parse import unquote

    schema: str | None = None
    kept = []
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if unquote(key) == "schema":
            schema = unquote(value)
        elif part:
            kept.append(part)
    return (f"{base}?{'&'.join(kept)}" if kept else base), schema


def with_schema(url: str, schema: str) -> str:
    """``url`` naming ``schema`` as the store's schema (replacing one it named)."""
    base, _ = split_schema(url)
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def local_dir_of(location: StoreLocation, env: Mapping[str, str] | None = None) -> Path:
    """The folder on this machine for what belongs with the store here: an adapter's settings
    (``claude-code.json``), its ``errors.log``, and caches of its own such as transcript
    cursors. A folder store's is the folder itself; a URL's (a server's, or any other
    backend's) is
    ``<default folder>/servers/<host>-<database>-<hash of the URL without its password>``, so
    every process of this user on this machine finds the same one (and a hook can log there
    when the server is down)."""
    if not is_store_url(location):
        return Path(location)
    env = os.environ if env is None else env
    shown = describe_store(location)
    rest = shown.split("://", 1)[1].split("?", 1)[0]
    netloc, _, database = rest.partition("/")
    host = netloc.rpartition("@")[2] or "local"
    name = "-".join(part for part in (host, database) if part)
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:60]
    import blake3  # only for a URL: the hooks' fast path imports this module (4 ms)

    digest = blake3.blake3(shown.encode()).hexdigest()[:12]
    plain = {k: v for k, v in env.items() if k != "CONTINUITY_HOME"}
    return default_store_path(plain) / "servers" / f"{safe}-{digest}"


def models_home() -> Path:
    """Where fetched models live (:mod:`continuity.retrieval.models`), and the onnx engine's
    converted graphs (``.onnx/``): ``$CONTINUITY_MODELS``, else
    ``$XDG_CACHE_HOME/continuity/models``, else ``~/.cache/continuity/models``."""
    chosen = os.environ.get("CONTINUITY_MODELS")
    if chosen:
        return Path(chosen).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return base / "continuity" / "models"
