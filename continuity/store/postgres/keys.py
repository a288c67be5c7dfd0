"""A thread's key in the PostgreSQL store, computed from its id on the client.

Every per-thread table is keyed by ``thread_key`` and every statement on one names it
(``WHERE thread_key = %s``), so a store can be spread over nodes by that one column (Citus's
distribution column): each statement then goes to the one node that holds the thread, and a
thread's rows in every table sit together. The key is computed here, not assigned by the
server (an identity column is one node's counter and needs a round trip before the key is
known): the first 63 bits of blake3 of the id, so a key is never negative (``-1`` stays free
for "unknown") and is the same for one id in every store and process.

Two ids with the same key (a chance of about n² / 2⁶⁴ among n threads: one in 10⁷ at
a million threads) cannot both be stored: the thread row is keyed by ``thread_key`` alone and
holds its id, every read checks the id, and an append to the second id finds the first's row
and raises :class:`~continuity.errors.ThreadKeyTaken` naming both, writing nothing. The rule
is deterministic: the id that was stored first keeps the key.

Nothing here imports psycopg.
"""

from __future__ import annotations

from typing import Final

import blake3

__all__ = ["KEY_DOMAIN", "thread_key"]

KEY_DOMAIN: Final = b"continuity thread key\0"
"""Hashed before the id: a thread key is not any other blake3 use's digest of the same bytes."""


def thread_key(thread_id: str) -> int:
    """The thread's key: blake3 of its id (UTF-8), the first 8 bytes big-endian, less the top
    bit (0 .. 2⁶³ - 1, a non-negative ``bigint``)."""
    digest = blake3.blake3(KEY_DOMAIN + thread_id.encode()).digest(8)
    return int.from_bytes(digest, "big") >> 1
