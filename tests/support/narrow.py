"""Checked narrowing for tests: a value of a union (or an optional), asserted to be the kind the
test expects.

``narrow(fr.MessageAppended, frame).content`` fails the test (naming what it got) where
``frame.content`` would fail with an AttributeError, and tells the type checker the same thing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from continuity.store.base import Thread

T = TypeVar("T")


def narrow(kind: type[T], value: object) -> T:
    """``value``, which must be an instance of ``kind``."""
    assert isinstance(value, kind), f"expected {kind.__name__}, got {value!r}"
    return value


def head_seq(thread: Thread) -> int:
    """The seq of the last frame of ``thread``, which must have one."""
    head = thread.head()
    assert head is not None, f"thread {thread.id!r} is empty"
    return head.seq
