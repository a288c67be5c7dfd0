"""typer's help renderer without the two parts of rich it never uses here.

``typer.rich_utils`` (imported when typer prints help or a usage error) imports
``rich.markdown`` (markdown-it, pygments: its ``markdown`` markup mode, which this app does not
use) and ``rich.traceback`` (its pretty exceptions, which the app turns off): about a third of a
``continuity <command> --help`` process. :func:`import_help_renderer` imports it with stand-ins
for those two names, each importing the real class on first use, so the help is the same text
and either mode still works. The stand-in modules are removed as soon as ``typer.rich_utils`` is
in: a later ``import rich.markdown`` gets the real module. If the renderer does not import with
them (another typer), it is left to import as usual.
"""

from __future__ import annotations

import inspect
import sys
from importlib import import_module
from types import ModuleType
from typing import Any, Final

__all__ = ["help_text", "import_help_renderer"]

_DEFERRED: Final = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}
"""The modules ``typer.rich_utils`` imports but does not need here, and the name it takes."""


class _Deferred(type):
    """The class of a stand-in: using the stand-in (calling it, an attribute, isinstance)
    imports the real class and uses that."""

    _module: str
    _name: str

    def real(cls) -> Any:
        return getattr(import_module(cls._module), cls._name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls.real()(*args, **kwargs)

    def __getattr__(cls, attr: str) -> Any:
        return getattr(cls.real(), attr)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.real())


def _stand_in(module: str, name: str) -> ModuleType:
    stand_in = ModuleType(module)
    setattr(stand_in, name, _Deferred(name, (), {"_module": module, "_name": name}))
    return stand_in


def import_help_renderer() -> None:
    """Import ``typer.rich_utils`` without ``rich.markdown`` and ``rich.traceback`` (above)."""
    if "typer.rich_utils" in sys.modules:
        return
    placed = {m: _stand_in(m, n) for m, n in _DEFERRED.items() if m not in sys.modules}
    sys.modules.update(placed)
    try:
        import_module("typer.rich_utils")
    except ImportError:  # not the typer this was written for: it imports as usual, later
        sys.modules.pop("typer.rich_utils", None)
    finally:
        for module, stand_in in placed.items():
            if sys.modules.get(module) is stand_in:
                del sys.modules[module]


_KEPT_LINES: Final = ("- ", "* ", "$ ", " ")
"""Lines a paragraph keeps on a line of their own: list items, commands, indented text."""


def help_text(doc: str) -> str:
    """A command's docstring as its help: each paragraph one line, which the help box wraps to
    the terminal (typer's rich mode keeps a docstring's line breaks, so a paragraph wrapped at
    the source's width breaks again, badly, inside a narrower box). A paragraph that starts
    with ``\\b`` is kept as it is (typer's mark for it), and so are lines of :data:`_KEPT_LINES`."""
    paragraphs = []
    for paragraph in inspect.cleandoc(doc).split("\n\n"):
        if paragraph.startswith("\b"):
            paragraphs.append(paragraph)
            continue
        lines: list[str] = []
        for line in paragraph.splitlines():
            if lines and not line.startswith(_KEPT_LINES):
                lines[-1] = f"{lines[-1]} {line.strip()}"
            else:
                lines.append(line.rstrip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)
