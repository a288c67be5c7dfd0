"""Make ``tests/data/opencode/opencode-1.18.33.db``: a real opencode database, written by the
pinned opencode CLI (``tools/agents.py``) against the scripted model server.

Two runs in one project (``/home/dev/proj``, created if missing): ``Please RUN_ECHO now`` (a
``bash`` call, an answer whose usage is over the model's context limit, so opencode compacts
the session and asks for a summary, then continues), and ``--continue`` with ``Now DELEGATE
it`` (a ``task`` call: a sub-agent session, ``parent_id`` set, answers ``child done``). The
database is then copied with SQLite's backup API, its ``event`` log (opencode's bus events,
which the adapter does not read) emptied and the file vacuumed at 1 KiB pages, which brings it
under 100 KB::

    python -m tools.gen_opencode_db tests/data/opencode/opencode-1.18.33.db
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.model_openai_chat import MODEL, OpenAIChat
from tests.support.model_server import ModelServer, Reply, Rule, Script, ToolCall, Usage
from tools import agents

PROJECT = Path("/home/dev/proj")
RUNS = (
    ["run", "Please RUN_ECHO now", "--format", "json"],
    ["run", "--continue", "Now DELEGATE it", "--format", "json"],
)


def script() -> Script:
    bash = ToolCall("bash", {"command": "echo hi-from-bash", "description": "echo"})
    task = ToolCall(
        "task",
        {"description": "child work", "prompt": "CHILD_WORK: say done", "subagent_type": "general"},
    )
    return Script(
        [
            Rule(Reply(tool_calls=(bash,)), phrase="RUN_ECHO", after_tool=False),
            Rule(
                Reply(
                    text="The command printed hi-from-bash.",
                    usage=Usage(input_tokens=250_000, output_tokens=20),
                ),
                after_tool="bash",
            ),
            Rule(
                Reply(text="SUMMARY: the user asked to run echo; it printed hi-from-bash."),
                main=None,
                anywhere="context summarization agent",
            ),
            Rule(
                Reply(text="Nothing more to do."),
                after_tool=False,
                anywhere="Continue if you have next steps",
            ),
            Rule(
                Reply(text="Let me think.", tool_calls=(task,)), phrase="DELEGATE", after_tool=False
            ),
            Rule(Reply(text="child done"), phrase="CHILD_WORK", after_tool=False),
            Rule(Reply(text="The sub-agent said: child done."), after_tool="task"),
        ]
    )


def config(url: str) -> dict[str, object]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted",
                "options": {"baseURL": url + "/v1", "apiKey": "sk-test-not-a-key"},
                "models": {
                    MODEL: {"name": "Scripted", "limit": {"context": 100_000, "output": 4_096}}
                },
            }
        },
        "model": f"fake/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"bash": "allow", "edit": "allow", "task": "allow"},
    }


def main(out: Path) -> int:
    exe = agents.install("opencode")
    PROJECT.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="oc-gen-"))
    try:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("XDG_", "OPENAI", "ANTHROPIC", "CONTINUITY_", "OPENCODE"))
        }
        env.update(
            HOME=str(home),
            PWD=str(PROJECT),
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_SHARE="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            OPENCODE_DISABLE_CLAUDE_CODE="1",
        )
        with ModelServer(script(), providers=[OpenAIChat()]) as server:
            folder = home / ".config" / "opencode"
            folder.mkdir(parents=True)
            (folder / "opencode.json").write_text(json.dumps(config(server.url), indent=2))
            for args in RUNS:
                subprocess.run(
                    [str(exe), *args], cwd=PROJECT, env=env, check=True, capture_output=True
                )
            unused = server.script.unused()
            if unused:
                print(f"rules that never answered: {unused}", file=sys.stderr)
                return 1
        src = sqlite3.connect(home / ".local" / "share" / "opencode" / "opencode.db")
        out.unlink(missing_ok=True)
        dst = sqlite3.connect(out)
        src.backup(dst)
        src.close()
        dst.execute("DELETE FROM event")
        dst.execute("DELETE FROM event_sequence")
        dst.commit()
        dst.execute("PRAGMA journal_mode=delete")
        dst.execute("PRAGMA page_size=1024")
        dst.execute("VACUUM")
        dst.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"{out}: {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "opencode.db")))
