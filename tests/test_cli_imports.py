"""The command line starts light: `airflow-lake --help` (and a command's `--help`) builds its parser without the
lake core, and `ls` of tables younger than their first checkpoint reads their logs without pyarrow — checked in a
fresh interpreter (as the console script runs), whose output must equal the same commands' run in this process,
where everything is loaded. `benchmarks/bench_cli.py` times them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.cli import main
from airflow_lake.lake import DataFile, LakeTable

HEAVY = ("pyarrow", "numpy", "pandas", "pyspark", "py4j", "airflow", "fsspec")
# Runs each argv through the console script's `main` in one fresh interpreter; prints, after their outputs, the
# heavy top-level modules and the lake-core modules that got loaded.
PROBE = r"""
import io, json, sys
from contextlib import redirect_stdout
from airflow_lake.cli import main
outputs = []
for argv in json.loads(sys.argv[1]):
    out = io.StringIO()
    with redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
    outputs.append([code, out.getvalue()])
loaded = sorted(sys.modules)
print(json.dumps({"outputs": outputs, "top": sorted({m.split(".")[0] for m in loaded}),
                  "modules": [m for m in loaded if m.startswith(("airflow_lake.lake.", "pyarrow."))]}))
"""


def fresh(*argvs: Sequence[str]) -> dict[str, Any]:
    """Run the CLI for each argv in one fresh interpreter: their (exit code, stdout) and what got imported."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps([list(a) for a in argvs])], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def in_process(capsys: pytest.CaptureFixture[str], argv: Sequence[str]) -> list[Any]:
    """(exit code, stdout) of the same command in this process (the core and pyarrow loaded)."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as stop:
        code = stop.code
    return [code, capsys.readouterr().out]


def commit(table: LakeTable, day: str, rows: int, bucket: int | None = None) -> None:
    """Commit one synthetic file (described in the log only) to partition `day`."""
    txn = table.begin("commit", "write")
    suffix = "" if bucket is None else f"_{bucket:05d}"
    txn.commit(added=[DataFile(path=f"dt={day}/part-{txn.instant}-00000{suffix}.parquet", partition={"dt": day},
                               rows=rows, bytes=rows * 10, bucket=bucket, instant=txn.instant, stats={})])


def test_help_imports_no_core_no_pyarrow_no_spark_no_airflow(capsys: pytest.CaptureFixture[str]) -> None:
    argvs = [["--help"], ["ls", "--help"], ["changes", "--help"], ["delete", "--help"], ["jars", "--help"]]
    probe = fresh(*argvs)
    assert not set(probe["top"]) & set(HEAVY), set(probe["top"]) & set(HEAVY)
    assert probe["modules"] == ["airflow_lake.lake.errors"]  # the one core module a parser needs (its errors)
    assert probe["outputs"] == [in_process(capsys, argv) for argv in argvs]
    assert probe["outputs"][0][0] == 0 and probe["outputs"][0][1].startswith("usage: airflow-lake")


def test_ls_of_young_tables_reads_their_logs_without_pyarrow(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "lake"
    for n in range(3):  # partitioned, bucketed, one more commit each
        table = LakeTable.create(str(root / f"db{n % 2}" / f"t{n}"), {
            "schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
            **({"bucket": {"columns": ["id"], "count": 4}} if n == 1 else {})})
        for c in range(n + 2):
            commit(table, f"d{c % 2}", 10 * (c + 1), bucket=c % 4 if n == 1 else None)
    probe = fresh(["ls", str(root)], ["ls", str(root), "--json"])
    assert not set(probe["top"]) & set(HEAVY), set(probe["top"]) & set(HEAVY)
    assert "airflow_lake.lake.format.checkpoints" not in probe["modules"]
    text, as_json = in_process(capsys, ["ls", str(root)]), in_process(capsys, ["ls", str(root), "--json"])
    assert probe["outputs"][0] == text
    lines = text[1].splitlines()
    assert [line.split()[:4] for line in lines[2:5]] == [
        ["db0/t0", "partitioned", "30", "2"], ["db0/t2", "partitioned", "100", "4"],
        ["db1/t1", "partitioned,", "bucketed", "4"]]
    for document in (probe["outputs"][1], as_json):  # ages of pending instants aside, none here: all equal
        assert document[0] == 0
    assert json.loads(probe["outputs"][1][1]) == json.loads(as_json[1])


def test_ls_of_a_table_with_a_checkpoint_loads_the_parquet_reader_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = LakeTable.create(str(tmp_path / "lake" / "t"), {"schema": "id BIGINT, dt STRING", "partition_by": ["dt"],
                                                            "properties": {"checkpoint.interval": "2"}})
    for c in range(3):
        commit(table, f"d{c}", 5)
    assert list((tmp_path / "lake" / "t" / "_lake" / "checkpoints").glob("*.parquet"))
    probe = fresh(["ls", str(tmp_path / "lake")])
    assert "pyarrow" in probe["top"] and "pyarrow.compute" not in probe["modules"]  # (only for writing one)
    assert not set(probe["top"]) & {"pandas", "pyspark", "py4j", "airflow"}, probe["top"]
    assert probe["outputs"] == [in_process(capsys, ["ls", str(tmp_path / "lake")])]
