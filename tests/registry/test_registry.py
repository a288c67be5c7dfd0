"""The generic registry by name (``continuity.registry``, ADR 0047): built-ins by import path,
imported on first use; names registered at run time; a name it does not know looked up in its
entry-point group — a real one, from a ``*.dist-info`` folder on ``sys.path`` as an installed
package leaves it — once per name; and a run that uses built-ins alone never reads the
installed packages' metadata (the hooks' start-up)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from continuity.errors import ContinuityError, UnknownName
from continuity.registry import Registry
from tests.support.model import build_tiny_model

GROUP = "continuity.tests.things"
MODULE = "registry_things"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on ``sys.path`` holding a module of things; the module is forgotten after."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text("ONE = 'one'\nTWO = 'two'\nTHREE = 3\n")
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    sys.modules.pop(MODULE, None)


def install(site: Path, entries: dict[str, str], name: str = "things-plugin") -> None:
    """An installed package declaring ``entries`` in the group, as pip leaves one."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = [f"[{GROUP}]", *(f"{k} = {v}" for k, v in entries.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def things(**builtins: str) -> Registry[object]:
    return Registry("thing", GROUP, builtins, key=str.lower)


def test_a_builtin_is_imported_on_first_use(site: Path) -> None:
    reg = things(one=f"{MODULE}:ONE")
    assert reg.names() == ["one"] and reg.knows("ONE") and list(reg) == ["one"]
    assert MODULE not in sys.modules  # naming, listing and asking cost no import
    assert reg.get("One") == "one"
    assert MODULE in sys.modules


def test_register_at_run_time_replaces_and_unregister_forgets(site: Path) -> None:
    reg = things(one=f"{MODULE}:ONE")
    another = object()
    reg.register("one", another)  # an object, or a string: its import path
    reg.register("two", f"{MODULE}:TWO")
    assert (reg.get("one"), reg.get("two"), reg.names()) == (another, "two", ["one", "two"])
    reg.unregister("one")
    assert not reg.knows("one") and reg.find("one") is None
    assert reg.find("two") == "two"


def test_an_unknown_name_is_a_clear_error(site: Path) -> None:
    reg = things(one=f"{MODULE}:ONE", two=f"{MODULE}:TWO")
    with pytest.raises(UnknownName) as caught:
        reg.get("four")
    message = str(caught.value)
    assert message.startswith("unknown thing 'four': known are one, two")
    assert repr(GROUP) in message  # where an outside package adds one
    assert isinstance(caught.value, LookupError) and isinstance(caught.value, ContinuityError)


def test_an_unknown_name_is_found_as_an_installed_entry_point(site: Path) -> None:
    install(site, {"three": f"{MODULE}:THREE", "one": f"{MODULE}:TWO"})
    reg = things(one=f"{MODULE}:ONE")
    assert reg.names() == ["one"]  # nothing read yet
    assert reg.get("THREE") == 3
    assert reg.get("one") == "one"  # a built-in keeps its name: a package cannot take it
    assert reg.installed() == ["one", "three"]


def test_an_unknown_name_is_looked_up_once(site: Path) -> None:
    reg = things()
    with pytest.raises(UnknownName, match="known are none"):
        reg.get("three")
    install(site, {"three": f"{MODULE}:THREE"})
    with pytest.raises(UnknownName):
        reg.get("three")  # not read again in this process
    assert reg.find("another") is None  # another name is: it reads the package installed since
    assert reg.get("three") == 3
    reg.unregister("three")
    assert reg.get("three") == 3  # forgotten, then found again


def test_installed_lists_every_entry_point_without_importing_them(site: Path) -> None:
    install(site, {"three": f"{MODULE}:THREE", "broken": "no_such_module_here:X"})
    reg = things(one=f"{MODULE}:ONE")
    assert reg.installed() == ["one", "three", "broken"]
    assert MODULE not in sys.modules
    with pytest.raises(ModuleNotFoundError) as caught:
        reg.get("broken")
    assert f"the thing 'broken' is 'no_such_module_here:X' ({GROUP})" in str(caught.value.__notes__)


def test_check_sees_what_is_loaded(site: Path) -> None:
    def text(obj: object) -> str:
        if not isinstance(obj, str):
            raise TypeError(f"{obj!r} is not text")
        return obj

    reg: Registry[str] = Registry(
        "thing", GROUP, {"one": f"{MODULE}:ONE", "three": f"{MODULE}:THREE"}, check=text
    )
    assert reg.get("one") == "one"
    with pytest.raises(TypeError, match="3 is not text") as caught:
        reg.get("three")
    assert "the thing 'three'" in " ".join(caught.value.__notes__)
    assert reg.get("one") == "one"


@pytest.mark.slow  # a fresh process
def test_builtins_alone_never_read_the_installed_packages_metadata(tmp_path: Path) -> None:
    """A folder store, a PostgreSQL URL's backend and a model folder of a built-in kind are
    found without importlib.metadata (the hooks' start-up); an unknown name reads it."""
    model = build_tiny_model(tmp_path / "model")
    probe = f"""
import json, sys
from pathlib import Path
from continuity import frames as fr
from continuity.store.locate import STORE_SCHEMES, open_store
from continuity.retrieval.models import load_folder
before = set(sys.modules)
with open_store(Path({str(tmp_path / "store")!r}), create=True) as store:
    store.thread("t").append(fr.message("user", "hello"))
STORE_SCHEMES.get("postgresql"), STORE_SCHEMES.get("POSTGRES")
load_folder(Path({str(model)!r}))
builtins = sorted(set(sys.modules) - before)
STORE_SCHEMES.find("nosuchscheme")
unknown = sorted(set(sys.modules) - before)
print(json.dumps(["importlib.metadata" in before, builtins, unknown]))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    already, builtins, unknown = json.loads(out.stdout)
    assert not already  # nothing read it before the probe started either
    assert "continuity.store.jsonl" in builtins and "continuity.retrieval.embedders" in builtins
    assert "continuity.store.postgres" not in builtins  # imported when a URL is opened
    assert "importlib.metadata" not in builtins
    assert "importlib.metadata" in unknown  # what the probe would have seen
