"""docs/specs.md and docs/api.md list every operation the job runner knows, as the runner sees it: whether it
needs Spark, and (specs.md's table) exactly the spec fields its parser accepts."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_lake.jobs import registry
from airflow_lake.lake.errors import LakeSpecError
from tests.conftest import ROOT

SPECS, API = (ROOT / "docs" / name for name in ("specs.md", "api.md"))
# The least each parser needs before it looks for unknown fields (no table is opened by `validate`).
SOURCE = {"path": "/nowhere/x.parquet"}
REQUIRED: dict[str, dict[str, Any]] = {
    "alter_table": {"changes": [{"drop": "c"}]}, "create_table": {"schema": "id BIGINT"}, "restore": {"to_seq": 1},
    "versioned_upsert": {"source": SOURCE, "version": 1}, "write": {"source": SOURCE},
}


def accepted_fields(operation: str) -> set[str]:
    """The fields `operation`'s parser reads, as its error for an unknown field lists them."""
    with pytest.raises(LakeSpecError) as caught:
        registry.validate(operation, {"table": "/nowhere/t", **REQUIRED.get(operation, {}), "not_a_field": 1})
    assert caught.value.field == "not_a_field", caught.value
    return set(re.findall(r"\w+", caught.value.fix.removeprefix("Use only ")))


def specs_table() -> dict[str, tuple[bool, set[str]]]:
    """specs.md's table of operations: name -> (needs Spark, spec fields)."""
    rows = {}
    for line in SPECS.read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 4 and cells[1] in ("yes", "no") and (name := re.fullmatch(r"`(\w+)`", cells[0])):
            rows[name.group(1)] = (cells[1] == "yes", set(re.findall(r"`(\w+)`", cells[3])))
    return rows


def test_specs_md_lists_every_operation_with_its_fields() -> None:
    table = specs_table()
    operations = registry.operations()
    assert sorted(table) == sorted(operations)
    for name, operation in operations.items():
        needs_spark, fields = table[name]
        assert needs_spark == operation.needs_spark, name
        assert fields == accepted_fields(name), name
        assert f"\n## {name}\n" in SPECS.read_text(), f"docs/specs.md has no section for {name}"


def test_api_md_lists_every_operation_by_kind() -> None:
    text = API.read_text()
    kinds = {}
    for kind, needs_spark in (("metadata only, no Spark", False), ("with Spark", True)):
        line = re.search(rf"^- {kind}[^:]*: (.*?)[;.]$", text, re.M | re.S)
        assert line is not None, kind
        kinds[needs_spark] = set(re.findall(r"`(\w+)`", line.group(1))) - {"spark"}
    operations = registry.operations()
    assert kinds == {flag: {n for n, o in operations.items() if o.needs_spark == flag} for flag in (False, True)}
