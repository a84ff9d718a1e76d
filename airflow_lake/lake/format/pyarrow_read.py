"""Reading a snapshot with pyarrow, without Spark: for small tables, tools and tests.

Files written since the native writer hold only the data columns (partition values live in the
directory names, as Hive lays them out); older files hold every column. Both read the same here: the
partition columns always come from the snapshot's partition values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spec.table_spec import TableSpec
from airflow_lake.lake.spec.types import coerce_literal

if TYPE_CHECKING:
    import pyarrow as pa


def arrow_type(type_name: str) -> pa.DataType:
    """The Arrow type Spark writes a column of `type_name` as."""
    import pyarrow as pa

    simple = {
        "boolean": pa.bool_(), "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(),
        "bigint": pa.int64(), "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
        "binary": pa.binary(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"),
    }
    if type_name in simple:
        return simple[type_name]
    precision, scale = type_name[len("decimal("):-1].split(",")
    return pa.decimal128(int(precision), int(scale))


def read_files(storage: Storage, spec: TableSpec, files: Sequence[DataFile],
               columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of `files` as one Arrow table in the table's column order (or `columns`)."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = [spec.column(c).name for c in columns] if columns else spec.column_names
    schema = pa.schema([(name, arrow_type(spec.column(name).type)) for name in wanted])
    # A file holds each column under its physical name, and none added after it was written (NULL here).
    physical = {c: spec.physical_of(c) for c in wanted if c not in spec.partition_columns}
    pieces = []
    filesystem = storage.filesystem  # a store's fsspec file system (None: local paths)
    for data_file in files:
        path = storage.path(data_file.path)
        held = {n.lower(): n for n in pq.read_schema(path, filesystem=filesystem).names}
        content = pq.read_table(path, columns=[held[p.lower()] for p in physical.values() if p.lower() in held],
                                filesystem=filesystem)
        arrays = {}
        for name in wanted:
            if name in spec.partition_columns:
                text = data_file.partition.get(name)
                type_name = spec.column(name).type
                value = None if text is None else coerce_literal(type_name, text, name)
                if type_name == "date" and value is not None:
                    value = dt.date.fromisoformat(value)
                arrays[name] = pa.array([value] * content.num_rows, arrow_type(type_name))
            elif physical[name].lower() in held:
                arrays[name] = content.column(held[physical[name].lower()]).cast(arrow_type(spec.column(name).type))
            else:
                arrays[name] = pa.nulls(content.num_rows, arrow_type(spec.column(name).type))
        pieces.append(pa.table(arrays, schema=schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()
