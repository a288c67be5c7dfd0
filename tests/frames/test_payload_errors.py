"""``parse_payload`` on a value a closed set does not hold (a message's role, a job's status):
the error names the field and lists the values it takes, in ``message()``'s words, not
msgspec's ("Invalid enum value")."""

from __future__ import annotations

import re

import pytest

from continuity import frames as fr
from continuity.errors import BadFrame


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (
            '{"role": "usr", "text": "hi"}',
            "role must be one of 'user', 'assistant', 'system', not 'usr'",
        ),
        (
            '{"type":"message_appended","role":"tool","content":[]}',
            "role must be one of 'user', 'assistant', 'system', not 'tool'",
        ),
        ('{"role": 3, "text": "hi"}', "role must be one of 'user', 'assistant', 'system', not 3"),
        (
            '{"type":"job_ended","job_id":"j","status":"exploded"}',
            "status must be one of 'succeeded', 'failed', 'cancelled', not 'exploded'",
        ),
    ],
)
def test_a_value_outside_a_closed_set_lists_the_values(payload: str, says: str) -> None:
    with pytest.raises(BadFrame, match=re.escape(says)) as caught:
        fr.parse_payload(payload)
    assert "Invalid enum value" not in str(caught.value)
