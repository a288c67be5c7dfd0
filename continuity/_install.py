"""The command that adds an optional extra to the continuity that is running, as it was installed.

``agent-continuity`` is not on the package index yet (the name is reserved for the release), so
``pip install 'agent-continuity[postgres]'`` works only once it is. Until then continuity runs
from a checkout: a venv's editable install (``pip install -e .``), ``pipx install .`` or
``uv tool install .``. The line a missing extra gives (:class:`~continuity.errors.MissingExtra`)
must work there, so it is built from what is known of this installation:

- **what to install from**: the checkout the code runs from (a ``pyproject.toml`` of
  ``agent-continuity`` beside the package: an editable install, or the source on the path), else
  the folder the installed distribution was built from (its ``direct_url.json``, PEP 610, as
  pip, pipx and uv write it), else the name on the index;
- **with what**: pipx or ``uv tool`` when their environment runs it (``--force`` reinstalls it
  with the extra), ``uv pip`` when uv installed it into a venv, else this interpreter's pip
  (plain ``pip`` when its venv is the active one).

Only the error path calls :func:`install_line`: it reads package metadata, which nothing else on
the hook path or at the command's start does (importing this module costs nothing: the errors
module takes :data:`DISTRIBUTION` from it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Mapping

DISTRIBUTION: Final = "agent-continuity"
"""The name continuity is installed by from the package index (ADR 0043: ``continuity`` there is
another project), reserved for the release: until then it is installed from a checkout. The
import package and the command are ``continuity``. (Also ``continuity.errors.DISTRIBUTION``.)"""

__all__ = ["Installed", "install_line", "installed"]

Installer = Literal["pip", "uv", "pipx", "uv tool"]


class Installed(NamedTuple):
    """What is known of how the running continuity was installed."""

    source: str
    """A folder to install from (a checkout), or the distribution's name on the index."""
    editable: bool
    installer: Installer
    python: str
    """The interpreter that runs continuity (whose environment the extra must go into)."""
    active: bool
    """Whether that interpreter's venv is the active one (then ``pip`` is its pip)."""


def install_line(extra: str, where: Installed | None = None) -> str:
    """The command that installs ``extra`` into the environment continuity runs in."""
    import shlex

    where = where or installed()
    target = shlex.quote(f"{where.source}[{extra}]")
    if where.installer == "pipx":
        return f"pipx install --force {'--editable ' if where.editable else ''}{target}"
    if where.installer == "uv tool":
        return f"uv tool install --force {'--editable ' if where.editable else ''}{target}"
    flag = "-e " if where.editable else ""
    if where.installer == "uv":
        python = "" if where.active else f" --python {shlex.quote(where.python)}"
        return f"uv pip install{python} {flag}{target}"
    pip = "pip" if where.active else f"{shlex.quote(where.python)} -m pip"
    return f"{pip} install {flag}{target}"


def installed() -> Installed:
    """How the running continuity was installed (see the module's docstring)."""
    package = Path(__file__).resolve().parent
    direct_url, recorded = _metadata(package)
    source, editable = source_of(package, direct_url)
    prefix = Path(sys.prefix)
    venv = os.environ.get("VIRTUAL_ENV") or ""
    return Installed(
        source=source,
        editable=editable,
        installer=installer_of(prefix, recorded),
        python=sys.executable or "python3",
        active=bool(venv) and Path(venv).resolve() == prefix.resolve(),
    )


def source_of(package: Path, direct_url: Mapping[str, object] | None) -> tuple[str, bool]:
    """What to install from, and whether editably: the checkout ``package`` (the folder of
    ``continuity``) sits in, else the local folder ``direct_url`` (the installed distribution's
    ``direct_url.json``) names, else the name on the index."""
    checkout = package.parent
    if _is_checkout(checkout):
        return str(checkout), True
    url = direct_url.get("url") if direct_url else None
    info = direct_url.get("dir_info") if direct_url else None
    if isinstance(url, str) and url.startswith("file://") and isinstance(info, dict):
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        folder = Path(url2pathname(urlparse(url).path))
        if folder.is_dir():
            return str(folder), info.get("editable") is True
    return DISTRIBUTION, False


def installer_of(prefix: Path, recorded: str) -> Installer:
    """What manages the environment at ``prefix``: pipx and ``uv tool`` keep one venv per tool
    under a folder of their own (``…/pipx/venvs/<name>``, ``…/uv/tools/<name>``); else the
    installer the distribution's metadata records (``INSTALLER``: ``uv`` or ``pip``)."""
    parts = prefix.parts
    if len(parts) >= 3 and parts[-2] == "venvs" and "pipx" in parts[-3]:
        return "pipx"
    if len(parts) >= 3 and parts[-2] == "tools" and parts[-3] == "uv":
        return "uv tool"
    return "uv" if recorded.strip() == "uv" else "pip"


def _is_checkout(folder: Path) -> bool:
    try:
        text = (folder / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return f'name = "{DISTRIBUTION}"' in text


def _metadata(package: Path) -> tuple[dict[str, object] | None, str]:
    """The installed distribution's ``direct_url.json`` (None unless the distribution is the
    running code: its files beside ``package``) and ``INSTALLER`` (of this environment, where
    the extra must go, whichever copy of the code runs)."""
    import json
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None, ""
    direct: object = None
    try:
        if Path(str(dist.locate_file(""))).resolve() == package.parent:
            raw = dist.read_text("direct_url.json")
            direct = json.loads(raw) if raw else None
        recorded = dist.read_text("INSTALLER") or ""
    except (OSError, ValueError):
        return None, ""
    return (direct if isinstance(direct, dict) else None), recorded
