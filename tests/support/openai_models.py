"""Instances of the ``openai`` package's pydantic models, built from their type annotations:
every field that allows null set to null, and a variant per member of each union-typed field
(two levels down), so a test can run every item type the package defines through a converter."""

from __future__ import annotations

import contextlib
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import pydantic

__all__ = ["instances", "values"]


def _strip(tp: Any) -> Any:
    while get_origin(tp) is typing.Annotated:
        tp = get_args(tp)[0]
    return tp


def _members(tp: Any) -> list[Any]:
    tp = _strip(tp)
    if get_origin(tp) in (Union, types.UnionType):
        return [_strip(a) for a in get_args(tp)]
    return [tp]


def values(tp: Any, depth: int = 0) -> list[Any]:
    """Values of type ``tp``: one per member of each union (models: every variant)."""
    out: list[Any] = []
    for m in _members(tp):
        if m is type(None):
            continue
        origin = get_origin(m)
        if origin is Literal:
            out.append(get_args(m)[0])
        elif m is str:
            out.append("x")
        elif m is bool:
            out.append(False)
        elif m is int:
            out.append(1)
        elif m is float:
            out.append(1.0)
        elif origin in (list, list):
            (inner,) = get_args(m)
            out += [[v] for v in values(inner, depth + 1)[:8]] or [[]]
        elif origin in (dict, dict):
            out.append({})
        elif isinstance(m, type) and issubclass(m, pydantic.BaseModel):
            out += instances(m, depth + 1)
        elif m is object or m is Any:
            out.append({})
    return out


def instances(model: type[pydantic.BaseModel], depth: int = 0) -> list[Any]:
    """``model`` built with null in every field that allows it, and a variant per union member
    of each field that holds a model (to two levels)."""
    base: dict[str, Any] = {}
    choices: dict[str, list[Any]] = {}
    for name, field in model.model_fields.items():
        key = field.alias or name
        ann = field.annotation
        nullable = type(None) in _members(ann)
        vals = values(ann, depth)
        if depth >= 2:
            vals = vals[:1]
        if nullable:
            base[key] = None  # the openai models mark few nulls required: set every one
        elif vals:
            base[key] = vals[0]
        elif not field.is_required():
            continue
        if len(vals) > 1 or (nullable and vals):
            choices[key] = vals
    built = [model.model_validate(base)]
    for key, vals in choices.items() if depth < 2 else ():
        for v in vals:
            with contextlib.suppress(pydantic.ValidationError):
                built.append(model.model_validate({**base, key: v}))
    return built
