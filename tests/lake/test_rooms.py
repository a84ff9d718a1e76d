"""The lake core's rooms: every import (type-only ones too) runs from a room to one below it, never up or across."""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_lake.lake

LAKE = Path(airflow_lake.lake.__file__).parent
# the floor is 0; rooms on one level may not import each other (commit, spark and publish stay apart)
LEVEL = {"errors": 0, "faults": 0, "spec": 1, "format": 2, "commit": 3, "spark": 3, "publish": 3,
         "write": 4, "upsert": 4, "buckets": 4, "clustering": 4, "maintenance": 4, "alter": 4, "delete": 4,
         "changes": 5, "table": 6, "sources": 7}


def room_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["airflow_lake", "lake"] or len(parts) < 3:
        return None
    return parts[2]


def imports_of(path: Path) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
    return out


def test_every_module_lives_in_a_known_room() -> None:
    top = sorted(p.stem for p in LAKE.glob("*.py") if p.name != "__init__.py")
    assert top == ["errors", "faults", "table"], f"modules beside the rooms: {top}"
    folders = sorted(p.name for p in LAKE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert set(folders) <= set(LEVEL), f"folders that are no room: {set(folders) - set(LEVEL)}"
    for folder in folders:
        doc = ast.get_docstring(ast.parse((LAKE / folder / "__init__.py").read_text())) or ""
        assert "Imports" in doc or "imports" in doc, f"{folder}/__init__.py does not say what it may import"


def test_no_import_runs_up_or_across_rooms() -> None:
    wrong: list[str] = []
    for path in LAKE.rglob("*.py"):
        if path.parent == LAKE and path.name == "__init__.py":
            continue  # the package's face hands the door's names on
        module = "airflow_lake.lake." + path.relative_to(LAKE).with_suffix("").as_posix().replace("/", ".")
        here = room_of(module.removesuffix(".__init__"))
        assert here in LEVEL, module
        for line, target in imports_of(path):
            if target.startswith("airflow") and not target.startswith("airflow_lake"):
                wrong.append(f"{module}:{line} imports Airflow ({target})")
            there = room_of(target)
            if there is None or there == here:
                continue
            if LEVEL[there] >= LEVEL[here]:
                wrong.append(f"{module}:{line} ({here}) imports {target} ({there})")
    assert not wrong, "imports that run up or across rooms:\n" + "\n".join(sorted(wrong))
