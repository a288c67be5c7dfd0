"""MkDocs hooks (``mkdocs.yml``): ``adr/`` and ``contracts/`` join the site where they are.

The pages link to ``adr/0013-….md`` and ``contracts/caches.md`` as the repository has them;
adding those folders' files to the site (not copying them into ``docs/``) keeps one copy of each,
and lets ``mkdocs build --strict`` check every link into them and out of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

__all__ = ["FOLDERS", "on_files"]

ROOT: Final = Path(__file__).resolve().parents[1]
FOLDERS: Final = ("adr", "contracts")


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for folder in FOLDERS:
        for path in sorted((ROOT / folder).iterdir()):
            if path.is_file() and path.suffix in (".md", ".json"):
                files.append(
                    File(
                        f"{folder}/{path.name}",
                        src_dir=str(ROOT),
                        dest_dir=config["site_dir"],
                        use_directory_urls=config["use_directory_urls"],
                    )
                )
    return files
