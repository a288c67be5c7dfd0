"""JSON-RPC lines (:mod:`continuity.mcp_server.jsonrpc`): every line is a message or the error
to answer, never an exception; the ``id`` of a request too deep to decode is still found."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from continuity.mcp_server import jsonrpc as rpc


def test_a_request_a_notification_and_a_reply() -> None:
    assert rpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"ping"}') == rpc.Incoming("ping", 1, {})
    note = rpc.parse(b'{"jsonrpc":"2.0","method":"notifications/initialized","params":null}')
    assert note == rpc.Incoming("notifications/initialized", None, {})
    assert rpc.parse(b'{"jsonrpc":"2.0","id":"a","result":{}}') == rpc.Incoming(None, "a", {})


@pytest.mark.parametrize(
    ("line", "code", "request_id", "notification"),
    [
        (b"", rpc.PARSE_ERROR, None, False),
        (b"\xff", rpc.PARSE_ERROR, None, False),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', rpc.INVALID_REQUEST, None, False),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', rpc.INVALID_REQUEST, None, False),
        (b'{"jsonrpc":"2.0","method":"x","params":"s"}', rpc.INVALID_PARAMS, None, True),
        (b'{"jsonrpc":"1.0","id":2,"method":"ping"}', rpc.INVALID_REQUEST, 2, False),
        (b'{"jsonrpc":"2.0","id":3,"method":"x","params":{"a":"\\udc00"}}', -32602, 3, False),
        (b'{"jsonrpc":"2.0","method":"x","params":{"a":"\\udc00"}}', -32602, None, True),
        (b'{"jsonrpc":"2.0","id":4,"method":"x","params":{"a":NaN}}', rpc.PARSE_ERROR, 4, False),
        (b'{"jsonrpc":"2.0","id":5,"method":"x","params":{"\\ud800":1}}', -32602, 5, False),
    ],
)
def test_what_is_not_a_message_is_the_error_to_answer(
    line: bytes, code: int, request_id: object, notification: bool
) -> None:
    found = rpc.parse(line)
    assert isinstance(found, rpc.Rejected)
    assert (found.code, found.id, found.notification) == (code, request_id, notification)


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (b'{"id": 7, "params": {"q": [[[]]]}}', 7),
        (b'{"params": {"id": 1, "q": [[[]]]}, "id": "x\\"y"}', 'x"y'),
        (b'{"params": {"id": 1}}', None),
        (b'{"id": {"n": 1}}', None),
        (b'{"id": null}', None),
        (b'{"id": "\\ud800"}', None),
        (b'[{"id": 3}]', None),
    ],
)
def test_the_top_level_id_is_salvaged_and_only_it(line: bytes, request_id: object) -> None:
    assert rpc.salvage_id(line) == request_id


def test_nesting_past_the_decoder_keeps_its_id() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    found = rpc.parse(b'{"jsonrpc":"2.0","id":"d","method":"x","params":{"a":' + deep + b"}}")
    assert isinstance(found, rpc.Rejected) and (found.code, found.id) == (rpc.PARSE_ERROR, "d")


def test_a_reply_that_is_not_unicode_text_is_still_one_json_line() -> None:
    line = rpc.encode(rpc.error("\ud800", rpc.INVALID_PARAMS, "bad \udfff"))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["error"]["code"] == rpc.INVALID_PARAMS


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_a_message_or_an_error_never_an_exception(line: bytes) -> None:
    assert isinstance(rpc.parse(line), rpc.Incoming | rpc.Rejected)
    rpc.salvage_id(line)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_JSON, st.sampled_from(["id", "method", "params", "jsonrpc"]))
def test_any_json_in_any_member_is_a_message_or_an_error(value: object, member: str) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}
    message[member] = value
    line = json.dumps(message).encode()
    found = rpc.parse(line)
    assert isinstance(found, rpc.Incoming | rpc.Rejected)
    assert json.loads(rpc.encode(rpc.error(getattr(found, "id", None), -1, "x")))
