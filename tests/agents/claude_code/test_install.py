"""``continuity install/uninstall claude-code``: merging our hooks into Claude Code's settings.

Every test starts from a settings file a real user could have (other hooks, permissions, a
model), checks that ours go in and come out without touching theirs, and that a file we cannot
read as settings is refused untouched.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from continuity.agents.claude_code.install import HOOKS, plan_install, settings_path
from continuity.cli.app import app

THEIRS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)", "Read(~/notes/**)"], "deny": []},
    "env": {"FOO": "bär"},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh"}]}
        ],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo hi", "timeout": 5}]}],
        "SessionStart": [
            {
                "matcher": "startup",
                "hooks": [{"type": "command", "command": "~/bin/continuity-notify.sh start"}],
            }
        ],
    },
    "statusLine": {"type": "command", "command": "~/bin/status"},
}
SLUGS = {event: slug for event, slug, _matcher, _timeout in HOOKS}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary HOME (so --scope user never reaches the real ~/.claude)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def settings(home: Path) -> Path:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(THEIRS, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + ".continuity-backup")


def is_ours(handler: dict[str, Any]) -> bool:
    command = handler.get("command", "")
    return any(command.endswith(f" hook {slug}") for slug in SLUGS.values())


def without_ours(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with every handler of ours (and the groups and events left empty) removed."""
    out = copy.deepcopy(data)
    hooks = out.get("hooks", {})
    for event in list(hooks):
        groups = []
        for group in hooks[event]:
            kept = [h for h in group["hooks"] if not is_ours(h)]
            if kept:
                groups.append({**group, "hooks": kept})
        if groups:
            hooks[event] = groups
        else:
            del hooks[event]
    if "hooks" in out and not hooks:
        del out["hooks"]
    return out


def our_handlers(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event, groups in data.get("hooks", {}).items():
        for group in groups:
            for h in group["hooks"]:
                if is_ours(h):
                    found.setdefault(event, []).append({**h, "matcher": group.get("matcher")})
    return found


def test_install_adds_ours_and_keeps_theirs(settings: Path) -> None:
    original = settings.read_bytes()
    result = cli("install", "claude-code")
    assert result.exit_code == 0, result.output
    assert str(settings) in result.stdout

    data = json.loads(settings.read_text(encoding="utf-8"))
    assert without_ours(data) == THEIRS
    ours = our_handlers(data)
    assert set(ours) == set(SLUGS)
    for event, handlers in ours.items():
        assert len(handlers) == 1, event
        (h,) = handlers
        assert h["type"] == "command" and isinstance(h["timeout"], int)
        argv = shlex.split(h["command"])
        assert argv[0] == "exec"  # the hook replaces the shell (hook_shell_command)
        assert Path(argv[1]).is_absolute()
        assert argv[-2:] == ["hook", SLUGS[event]]
    assert ours["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    assert ours["PreCompact"][0]["matcher"] == "manual|auto"
    assert ours["UserPromptSubmit"][0]["matcher"] is None  # takes no matcher
    # theirs come first, in their order
    assert data["hooks"]["UserPromptSubmit"][0] == THEIRS["hooks"]["UserPromptSubmit"][0]
    assert backup_of(settings).read_bytes() == original


def test_installing_twice_changes_nothing(settings: Path) -> None:
    original = settings.read_bytes()
    assert cli("install", "claude-code").exit_code == 0
    installed = settings.read_bytes()
    stamp = settings.stat().st_mtime_ns
    again = cli("install", "claude-code")
    assert again.exit_code == 0
    assert "nothing changed" in again.stdout
    assert settings.read_bytes() == installed
    assert settings.stat().st_mtime_ns == stamp
    assert backup_of(settings).read_bytes() == original  # not overwritten with our own version


def test_reinstall_with_another_store_replaces_ours(settings: Path, tmp_path: Path) -> None:
    assert cli("--store", str(tmp_path / "a"), "install", "claude-code").exit_code == 0
    assert cli("--store", str(tmp_path / "b b"), "install", "claude-code").exit_code == 0
    data = json.loads(settings.read_text())
    ours = our_handlers(data)
    assert all(len(handlers) == 1 for handlers in ours.values())
    for handlers in ours.values():
        command = handlers[0]["command"]
        assert "CONTINUITY_HOME=" in command and "b b" in command and "/a " not in command
    assert without_ours(data) == THEIRS


def test_uninstall_gives_back_the_settings_from_before_the_install(settings: Path) -> None:
    original = settings.read_bytes()
    assert cli("install", "claude-code").exit_code == 0
    result = cli("uninstall", "claude-code")
    assert result.exit_code == 0, result.output
    assert "removed" in result.stdout and "as it was before" in result.stdout
    assert settings.read_bytes() == original  # byte for byte: their layout, not ours
    assert our_handlers(json.loads(settings.read_text())) == {}
    assert not backup_of(settings).exists()  # given back, so no longer needed


def test_a_reinstall_keeps_the_first_backup(settings: Path, tmp_path: Path) -> None:
    original = settings.read_bytes()
    assert cli("install", "claude-code").exit_code == 0
    result = cli("--store", str(tmp_path / "other"), "install", "claude-code")
    assert result.exit_code == 0, result.output
    assert "before the first install" in result.stdout
    assert backup_of(settings).read_bytes() == original  # not the first install's version
    assert cli("uninstall", "claude-code").exit_code == 0
    assert settings.read_bytes() == original


def test_uninstall_after_the_user_changed_their_settings_keeps_both(settings: Path) -> None:
    original = settings.read_bytes()
    assert cli("install", "claude-code").exit_code == 0
    data = json.loads(settings.read_text())
    data["model"] = "sonnet"  # changed by hand while installed
    settings.write_text(json.dumps(data))
    result = cli("uninstall", "claude-code")
    assert result.exit_code == 0, result.output
    assert str(backup_of(settings)) in result.stdout and "changed since" in result.stdout
    assert json.loads(settings.read_text()) == {**THEIRS, "model": "sonnet"}
    assert backup_of(settings).read_bytes() == original  # not thrown away

    # The next install starts from the settings of now: the stale backup is replaced.
    now = settings.read_bytes()
    assert cli("install", "claude-code").exit_code == 0
    assert backup_of(settings).read_bytes() == now
    assert cli("uninstall", "claude-code").exit_code == 0
    assert settings.read_bytes() == now and not backup_of(settings).exists()


def test_uninstall_removes_what_install_created(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "README.md").write_text("mine")
    args = ("--scope", "project", "--project", str(project))
    assert cli("install", "claude-code", *args).exit_code == 0
    assert (project / ".claude" / "settings.json").is_file()
    result = cli("uninstall", "claude-code", *args)
    assert result.exit_code == 0, result.output
    assert "was removed" in result.stdout
    assert sorted(p.name for p in project.iterdir()) == ["README.md"]  # no {}, no backup


def test_uninstall_keeps_a_settings_folder_holding_other_files(home: Path) -> None:
    claude = home / ".claude"
    claude.mkdir()
    (claude / "CLAUDE.md").write_text("notes")
    assert cli("install", "claude-code").exit_code == 0
    assert cli("uninstall", "claude-code").exit_code == 0
    assert sorted(p.name for p in claude.iterdir()) == ["CLAUDE.md"]


def test_uninstall_when_nothing_is_installed_changes_nothing(settings: Path) -> None:
    original = settings.read_bytes()
    result = cli("uninstall", "claude-code")
    assert result.exit_code == 0
    assert "nothing changed" in result.stdout
    assert settings.read_bytes() == original
    assert not backup_of(settings).exists()


@pytest.mark.parametrize("command", ["install", "uninstall"])
@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_project_folder_that_is_not_there_is_refused(
    tmp_path: Path, command: str, kind: str
) -> None:
    project = tmp_path / "nonexistent" / "dir"
    if kind == "file":
        project = tmp_path / "a-file"
        project.write_text("not a folder")
    before = sorted(tmp_path.rglob("*"))
    result = cli(command, "claude-code", "--scope", "project", "--project", str(project))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and str(project) in result.stderr
    assert ("no project folder" if kind == "missing" else "not a folder") in result.stderr
    assert sorted(tmp_path.rglob("*")) == before  # nothing created


def test_dry_run_prints_the_diff_and_writes_nothing(settings: Path) -> None:
    original = settings.read_bytes()
    result = cli("install", "claude-code", "--dry-run")
    assert result.exit_code == 0
    added = [line for line in result.stdout.splitlines() if line.startswith("+")]
    assert any("hook session-start" in line for line in added)
    assert any("hook pre-compact" in line for line in added)
    assert settings.read_bytes() == original
    assert not backup_of(settings).exists()

    assert cli("install", "claude-code").exit_code == 0
    installed = settings.read_bytes()
    result = cli("uninstall", "claude-code", "--dry-run")
    assert result.exit_code == 0
    removed = [line for line in result.stdout.splitlines() if line.startswith("-")]
    assert any("hook user-prompt-submit" in line for line in removed)
    assert settings.read_bytes() == installed


def test_dry_run_into_a_missing_file_creates_nothing(home: Path) -> None:
    result = cli("install", "claude-code", "--dry-run")
    assert result.exit_code == 0
    assert "hook stop" in result.stdout
    assert not (home / ".claude").exists()


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"hooks": {}',
        "[1, 2]",
        '"settings"',
        '{"hooks": []}',
        '{"hooks": "none"}',
        '{"hooks": {"Stop": {"hooks": []}}}',
        '{"hooks": {"Stop": "echo"}}',
        "\xff\xfe not utf-8",
    ],
    ids=[
        "not-json",
        "truncated",
        "array",
        "string",
        "hooks-array",
        "hooks-string",
        "event-object",
        "event-string",
        "not-utf8",
    ],
)
@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_malformed_settings_are_refused_untouched(
    settings: Path, content: str, command: str
) -> None:
    settings.write_bytes(content.encode("latin-1"))
    result = cli(command, "claude-code")
    assert result.exit_code != 0
    assert result.stdout == ""
    assert str(settings) in result.stderr and "not" in result.stderr
    assert result.stderr.count("\n") == 1
    assert settings.read_bytes() == content.encode("latin-1")
    assert not backup_of(settings).exists()
    assert [p.name for p in settings.parent.iterdir()] == ["settings.json"]


def test_a_missing_settings_file_and_folder_are_created(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    result = cli("install", "claude-code", "--scope", "project", "--project", str(project))
    assert result.exit_code == 0, result.output
    path = project / ".claude" / "settings.json"
    data = json.loads(path.read_text())
    assert set(our_handlers(data)) == set(SLUGS)
    assert without_ours(data) == {}
    assert not backup_of(path).exists()  # nothing to back up


@pytest.mark.parametrize(
    ("scope", "where"),
    [("user", "home"), ("project", "project"), ("local", "project")],
)
def test_scopes_map_to_the_right_settings_file(
    scope: str, where: str, home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    result = cli("install", "claude-code", "--scope", scope, "--project", str(project))
    assert result.exit_code == 0, result.output
    expected = {
        "user": home / ".claude" / "settings.json",
        "project": project / ".claude" / "settings.json",
        "local": project / ".claude" / "settings.local.json",
    }[scope]
    written = sorted(p for p in tmp_path.rglob("settings*.json"))
    assert written == [expected]
    assert (
        cli("uninstall", "claude-code", "--scope", scope, "--project", str(project)).exit_code == 0
    )
    assert not expected.exists()  # install made it, uninstall took it away


def test_settings_path_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings_path("user", home=tmp_path) == tmp_path / ".claude" / "settings.json"
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path / "p"))
    assert settings_path("project") == tmp_path / "p" / ".claude" / "settings.json"
    monkeypatch.delenv("CLAUDE_PROJECT_DIR")
    monkeypatch.chdir(tmp_path)
    assert settings_path("local") == tmp_path / ".claude" / "settings.local.json"
    assert (
        settings_path("local", Path("rel")) == tmp_path / "rel" / ".claude" / "settings.local.json"
    )


def transcript_line(session: str) -> str:
    return json.dumps(
        {
            "type": "user",
            "uuid": "00000000-0000-4000-8000-000000000001",
            "sessionId": session,
            "timestamp": "2026-01-05T09:00:00Z",
            "cwd": "/work/demo",
            "message": {"role": "user", "content": "hello"},
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize("with_store", [False, True], ids=["env-store", "installed-store"])
def test_the_installed_command_runs_from_anywhere(
    settings: Path, tmp_path: Path, with_store: bool
) -> None:
    store = tmp_path / "store with space"
    args = ["--store", str(store)] if with_store else []
    assert cli(*args, "install", "claude-code").exit_code == 0
    data = json.loads(settings.read_text())
    command = our_handlers(data)["UserPromptSubmit"][0]["command"]
    assert command.startswith(("exec /", "CONTINUITY_HOME="))

    session = "abcdef01-0000-4000-8000-000000000000"
    transcript = tmp_path / "projects" / "p" / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text(transcript_line(session) + "\n")
    payload = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": "/work/demo",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "hello",
    }
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"]}  # no venv on PATH
    if not with_store:
        env["CONTINUITY_HOME"] = str(store)
    proc = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        cwd="/",
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert (proc.stdout, proc.stderr) == (b"", b"")
    assert (store / "threads" / f"cc-{session}.jsonl").is_file()


def test_a_symlinked_settings_file_stays_a_symlink(home: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-settings.json"
    real.write_text(json.dumps(THEIRS))
    link = home / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    assert cli("install", "claude-code").exit_code == 0
    assert link.is_symlink() and link.resolve() == real
    assert set(our_handlers(json.loads(real.read_text()))) == set(SLUGS)
    assert cli("uninstall", "claude-code").exit_code == 0
    assert link.is_symlink()
    assert json.loads(real.read_text()) == THEIRS


def test_the_file_mode_is_kept(settings: Path) -> None:
    settings.chmod(0o600)
    assert cli("install", "claude-code").exit_code == 0
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600


def test_plan_install_is_a_pure_preview(settings: Path) -> None:
    original = settings.read_bytes()
    plan = plan_install(settings)
    assert plan.changed and plan.before == original.decode()
    assert plan.after is not None and "hook session-end" in plan.after
    assert settings.read_bytes() == original


# --- links and odd files planted in an untrusted repository (ADR 0013) -----------------------


@pytest.fixture
def victim(home: Path) -> Path:
    """The user's own settings, which a planted link points at."""
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(THEIRS))
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A cloned repository with project settings of its own."""
    repo = tmp_path / "repo"
    (repo / ".claude").mkdir(parents=True)
    (repo / ".claude" / "settings.json").write_text('{"model": "haiku"}\n')
    return repo


def project_args(repo: Path) -> tuple[str, ...]:
    return ("--scope", "project", "--project", str(repo))


def snapshot(*roots: Path) -> dict[str, bytes | str]:
    """Every entry under ``roots``: a file's bytes, or where a link points."""
    out: dict[str, bytes | str] = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.is_symlink():
                out[str(p)] = f"-> {os.readlink(p)}"
            elif p.is_file():
                out[str(p)] = p.read_bytes()
    return out


@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_a_backup_link_planted_in_a_repository_is_never_followed(
    repo: Path, victim: Path, home: Path, command: str
) -> None:
    settings = repo / ".claude" / "settings.json"
    if command == "uninstall":
        assert cli("install", "claude-code", *project_args(repo)).exit_code == 0
        backup_of(settings).unlink()
    backup_of(settings).symlink_to(victim)
    before = snapshot(repo, home)
    result = cli(command, "claude-code", *project_args(repo))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert str(backup_of(settings)) in result.stderr and "symbolic link" in result.stderr
    assert snapshot(repo, home) == before  # the user's settings, the repository's, the link


def test_a_dangling_backup_link_is_not_written_through(repo: Path, tmp_path: Path) -> None:
    settings = repo / ".claude" / "settings.json"
    target = tmp_path / "home" / ".bashrc"
    backup_of(settings).symlink_to(target)
    result = cli("install", "claude-code", *project_args(repo))
    assert result.exit_code == 1 and "symbolic link" in result.stderr
    assert not target.exists()
    assert settings.read_text() == '{"model": "haiku"}\n'


def test_a_backup_path_that_is_a_folder_is_refused(settings: Path) -> None:
    backup_of(settings).mkdir()
    original = settings.read_bytes()
    result = cli("install", "claude-code")
    assert result.exit_code == 1 and "not a regular file" in result.stderr
    assert settings.read_bytes() == original


@pytest.mark.parametrize("link", ["file", "folder"])
def test_project_settings_that_lead_out_of_the_project_are_refused(
    tmp_path: Path, victim: Path, home: Path, link: str
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    if link == "file":
        (repo / ".claude").mkdir()
        (repo / ".claude" / "settings.json").symlink_to(victim)
    else:
        (repo / ".claude").symlink_to(victim.parent)
    before = snapshot(repo, home)
    for command in ("install", "uninstall"):
        result = cli(command, "claude-code", *project_args(repo))
        assert result.exit_code == 1, command
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and "leads out of the project" in result.stderr
        assert snapshot(repo, home) == before


def test_a_link_inside_the_project_is_written_through(repo: Path) -> None:
    shared = repo / "config" / "claude.json"
    shared.parent.mkdir()
    shared.write_text(json.dumps(THEIRS))
    link = repo / ".claude" / "settings.local.json"
    link.symlink_to(Path("..") / "config" / "claude.json")
    args = ("--scope", "local", "--project", str(repo))
    assert cli("install", "claude-code", *args).exit_code == 0
    assert link.is_symlink()
    assert set(our_handlers(json.loads(shared.read_text()))) == set(SLUGS)
    assert cli("uninstall", "claude-code", *args).exit_code == 0
    assert json.loads(shared.read_text()) == THEIRS


def test_a_settings_path_that_is_not_a_regular_file_is_refused(home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    os.mkfifo(path)  # reading it would wait for a writer forever
    result = cli("install", "claude-code")
    assert result.exit_code == 1
    assert "not a regular file" in result.stderr
    assert stat.S_ISFIFO(path.lstat().st_mode)
    assert not backup_of(path).exists()
