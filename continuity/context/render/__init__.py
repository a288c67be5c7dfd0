"""Rendering a context bundle for a model: Anthropic Messages, OpenAI Chat Completions, OpenAI
Responses, plain text.

Pure and deterministic: a renderer reads only the bundle (which holds the summary texts and the
messages' provider hints), never the store, and the same bundle always renders to the same
value. The one exception is asked for: given ``artifacts=`` (an artifact store, a store or a
thread), the API renderers read the bytes of the images they send from it.

The three API shapes share one normalisation of the recent window, so they always validate:

* roles alternate user/assistant and the first message is the user's; a ``system`` message of
  the window joins the system prompt (Anthropic's ``system`` parameter, OpenAI's leading system
  or developer message), after ``system_prefix`` and before the summaries;
* a tool call is answered by exactly one tool result in the very next user turn, matched by
  position: the k-th call with an id pairs with the k-th result with that id, so a runtime that
  reuses ids (numbering calls per turn) keeps every pair, a reused id being renamed in the
  request (``<id>_2``, …); anything that would break the pairing (a result whose call fell out
  of the window, a call whose result is not in it) is turned into a text block that says what
  it was;
* the turn in flight is the assistant turns after the last user turn that holds more than tool
  results (the tool loop in progress): by default (``thinking="in_flight"``) its signed
  Anthropic thinking blocks and its OpenAI Responses reasoning items are sent back unchanged
  (the APIs need them there) and every older one is dropped (the APIs allow it); unsigned
  thinking is never sent;
* a provider's own block (``ProviderBlock``) goes back unchanged to the provider it came from,
  and is told as text to the others; the hints a converter left in a message's ``meta``
  (``<provider>.layout``, ``openai.role``; :mod:`continuity.context.convert`) give the provider
  back its exact shape: ids, the members no typed block holds, content as a string or a list;
* images go as base64 when ``artifacts=`` is given, else by their URL, else as a text
  placeholder; an empty message gets a placeholder text;
* an elided block reads as its stub's text; an elided tool call keeps its id and name, and its
  input is ``{"elided": <the stub's text>}``, so it still pairs with its result.

ADR 0019 has the mapping tables and the rules. The modules:

- :mod:`.parts`: what a block becomes in a request (a part), and the text a block is told as;
- :mod:`.window`: the recent window normalised into turns (the rules above);
- :mod:`.system`: the system text in its sections, and a lone system message given back whole;
- :mod:`.anthropic`, :mod:`.openai_chat`, :mod:`.openai_responses`: the three API shapes;
- :mod:`.text`: plain text, for another agent's context;
- the layouts a converter leaves in ``meta`` are :mod:`continuity.context.layout`'s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import msgspec

from continuity.context.bundle import ContextBundle, bundle_bytes

# The shapes' modules are loaded on first use (PEP 562, as the package root does): a restore
# renders text only and a JSON compile none, and neither pays for the other shapes. Type
# checkers read these imports; the run time serves the same names from ``_HOMES`` below (a
# test keeps the two equal).
if TYPE_CHECKING:
    from continuity.context.layout import ROLE_HINT as ROLE_HINT, Provider as Provider
    from continuity.context.render.anthropic import (
        CacheMode as CacheMode,
        to_anthropic as to_anthropic,
    )
    from continuity.context.render.openai_chat import to_openai as to_openai
    from continuity.context.render.openai_responses import (
        to_openai_responses as to_openai_responses,
    )
    from continuity.context.render.text import to_text as to_text
    from continuity.context.render.window import (
        CONTINUING as CONTINUING,
        ThinkingMode as ThinkingMode,
    )

Format: TypeAlias = Literal["json", "anthropic", "openai", "openai-responses", "text"]
FORMATS: Final[tuple[Format, ...]] = ("json", "anthropic", "openai", "openai-responses", "text")

_json_encoder: Final = msgspec.json.Encoder()
_HOMES: Final[dict[str, str]] = {
    "ROLE_HINT": "continuity.context.layout",
    "Provider": "continuity.context.layout",
    "CacheMode": "continuity.context.render.anthropic",
    "to_anthropic": "continuity.context.render.anthropic",
    "to_openai": "continuity.context.render.openai_chat",
    "to_openai_responses": "continuity.context.render.openai_responses",
    "to_text": "continuity.context.render.text",
    "CONTINUING": "continuity.context.render.window",
    "ThinkingMode": "continuity.context.render.window",
}


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted([*_HOMES, "FORMATS", "Format", "render"])
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__getattr__("__all__")})


def render(bundle: ContextBundle, fmt: Format, **kw: Any) -> str:
    """The bundle rendered as a string: JSON for "json" (the bundle's canonical bytes),
    "anthropic", "openai" and "openai-responses"; plain text for "text". ``kw`` goes to the
    format's function."""
    if fmt == "json":
        if kw:
            raise TypeError(f"format 'json' takes no options (got {', '.join(sorted(kw))})")
        return bundle_bytes(bundle).decode()
    if fmt == "anthropic":
        from continuity.context.render.anthropic import to_anthropic

        return _json_encoder.encode(to_anthropic(bundle, **kw)).decode()
    if fmt == "openai":
        from continuity.context.render.openai_chat import to_openai

        return _json_encoder.encode(to_openai(bundle, **kw)).decode()
    if fmt == "openai-responses":
        from continuity.context.render.openai_responses import to_openai_responses

        return _json_encoder.encode(to_openai_responses(bundle, **kw)).decode()
    if fmt == "text":
        from continuity.context.render.text import to_text

        return to_text(bundle, **kw)
    raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
