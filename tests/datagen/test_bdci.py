"""The BDCI-shaped generator: 11 files, base-0 five times the others, the contest's columns, repeated keys."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_lake.datagen import bdci


def test_the_files_have_the_contest_shape(tmp_path: Path) -> None:
    paths = bdci.generate(tmp_path, 1000, keys=1500)
    assert [p.name for p in paths] == [f"base-{i}.parquet" for i in range(11)]
    tables = [pq.read_table(p) for p in paths]
    assert [t.num_rows for t in tables] == [5000] + [1000] * 10
    assert tables[0].schema.names == ["uuid", "ip", "hostname", "requests", "name", "city", "job", "phonenum"]
    assert str(tables[0].schema.field("requests").type) == "int64"
    first = tables[0].column("uuid")
    assert pc.count_distinct(first).as_py() < len(first)  # keys repeat within a file
    later = set(tables[3].column("uuid").to_pylist())
    assert later & set(first.to_pylist())  # and across files
    names = tables[1].column("name").to_pylist()
    assert 0 < names.count("null") < len(names)  # sometimes the string "null"
    assert bdci.generate(tmp_path / "again", 1000, keys=1500)[4].read_bytes() == paths[4].read_bytes()  # seeded
