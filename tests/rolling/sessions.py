"""A long scripted Claude Code session with finished topics, for the rolling tests."""

from __future__ import annotations

from pathlib import Path

from tests.support.transcripts import Transcript

TOPICS: tuple[tuple[str, str, str], ...] = (
    ("Fix the login redirect loop in the authentication middleware", "auth/login.py", "pytest"),
    ("Speed up the tokenizer lexer for nested brackets", "parser/lexer.py", "cargo"),
    ("Write the deployment guide for kubernetes clusters", "docs/deploy.md", "kubectl"),
)
"""Each topic: its first prompt, the file it works on, the command it runs."""


def usage(tokens: int) -> dict[str, int]:
    """Claude's usage for a request whose context held ``tokens`` tokens."""
    return {
        "input_tokens": 10,
        "cache_creation_input_tokens": 500,
        "cache_read_input_tokens": tokens - 610,
        "output_tokens": 100,
    }


def topic(t: Transcript, n: int, turns: int, *, tokens: int = 1_000) -> None:
    """``turns`` turns on topic ``n``: a prompt, a tool call on its file, an answer; the last
    answer says it is done."""
    prompt, path, command = TOPICS[n]
    for i in range(turns):
        word = prompt.split()[1 + i % 3].lower()
        t.prompt(prompt if i == 0 else f"Now check the {word} part again in {path}")
        t.tool("Edit", {"file_path": f"/work/{path}", "old_string": "a", "new_string": "b"}, "ok")
        t.tool("Bash", {"command": f"{command} run"}, "passed")
        last = i == turns - 1
        t.say("All done: the change is complete." if last else "Edited.", usage=usage(tokens))


SESSION = "5e551011-0000-4000-8000-000000000001"


def long_session(folder: Path, *, final_tokens: int) -> Transcript:
    """Topic 0 (6 turns), topic 1 (6 turns), then 22 turns of topic 2; the last two answers'
    context is ``final_tokens`` (a hook's ingest holds the last response back: it may grow)."""
    t = Transcript(folder / f"{SESSION}.jsonl", SESSION, "/work")
    topic(t, 0, 6)
    topic(t, 1, 6)
    topic(t, 2, 20)
    topic(t, 2, 2, tokens=final_tokens)
    t.flush()
    return t
