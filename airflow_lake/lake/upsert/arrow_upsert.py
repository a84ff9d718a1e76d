"""A versioned upsert of Parquet files without Spark: pyarrow, in the caller's own process.

An upsert of a small batch spent most of its time starting or talking to Spark: a spark-submit starts a JVM
(20 s) for a few thousand rows, and even in a warm session the eleven BDCI upserts cost 2.4x a one-shot Spark job
(docs/benchmarks.md 17). Here the same upsert is done with pyarrow and numpy: read the files, conform them to the
table, the same stamps (`physical.delta_rows`), the same fingerprint (`versions.fingerprint_aggregates`: Spark's
`xxhash64` computed bit for bit, `format.spark_hash`), the same bucket files (`spark.arrow_writer`), the same
checks and the same commit (`upsert.commit_upsert`). A retry, a re-run of the same batch through either path,
parallel upserts and out-of-order versions behave as with Spark: the log decides, as it does there.

Only what is proven the same is done here; anything else raises `NeedsSpark` before anything is written, and the
caller runs the upsert on Spark (`arrow_source` and `unsupported` say why): a source that is not plain local
Parquet files of the table's columns in types that convert exactly, delete markers, schema evolution that adds
columns, plugin merge operators, `last_non_null` null values on a column that is not a string, and tables whose
bucketing, sort or partition columns `spark.arrow_writer` cannot write as Spark does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.commit import requests
from airflow_lake.lake.commit.transaction import begin
from airflow_lake.lake.errors import LakeSchemaError, LakeSpecError
from airflow_lake.lake.format import spark_hash
from airflow_lake.lake.format.consumed import CONSUMED
from airflow_lake.lake.format.pyarrow_read import arrow_type
from airflow_lake.lake.format.table_state import UPSERT_ACTION
from airflow_lake.lake.spark import arrow_writer
from airflow_lake.lake.spark.file_writer import MAX_SEGMENT_BYTES, empty_partition_message, too_long_message
from airflow_lake.lake.spec import merge_ops
from airflow_lake.lake.spec.partitions import NULL_PARTITION, check_partition_value, escape, null_name_problem
from airflow_lake.lake.spec.table_spec import TableSpec, stored_spec
from airflow_lake.lake.upsert import versions as versions_module
from airflow_lake.lake.upsert.physical import (
    DELETED,
    NEWEST,
    OLDEST,
    SEQ,
    oldest_of,
    operator_of,
    physical_spec,
    qualified_of,
    value_columns,
    version_of,
)
from airflow_lake.lake.upsert.upsert import OPERATION, Upserted, commit_upsert, plain_keys, resolve_clash

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from airflow_lake.lake.format.snapshots import TableState
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
_WIDER_INTS = {"int8": 0, "int16": 1, "int32": 2, "int64": 3}
_SAME = {"large_string": "string", "large_binary": "binary"}


class NeedsSpark(Exception):
    """This upsert cannot be done without Spark (the message says why); nothing was written."""


@dataclass(frozen=True)
class ArrowSource:
    """Local Parquet files of one schema, small enough to upsert without Spark."""

    files: tuple[str, ...]
    schema: pa.Schema
    bytes: int


def arrow_source(path: str, fmt: str = "parquet", options: Mapping[str, str] | None = None, *,
                 max_bytes: int) -> ArrowSource:
    """The files of a `path` source, as Spark would list them, when they can be upserted without Spark: a local
    Parquet file, or a directory of them with no subdirectory (Spark would read one as a partition column), no
    options, no link, one schema, at most `max_bytes` in all. Raises `NeedsSpark` otherwise."""
    import pyarrow.parquet as pq

    from airflow_lake.lake.format.storage import has_magic, is_local

    if fmt != "parquet" or options:
        raise NeedsSpark("the source is not plain Parquet files (a format or options)")
    local = path[len("file://"):] if path.startswith("file://") else path
    if not is_local(path) or has_magic(local) or not os.path.isabs(local):
        raise NeedsSpark("the source is not a local path without wildcards")
    if os.path.islink(local):
        raise NeedsSpark("the source is a link")
    if os.path.isfile(local):
        files = [local]
    elif os.path.isdir(local):
        files = []
        for entry in sorted(os.scandir(local), key=lambda e: e.name):
            if entry.name.startswith(("_", ".")):
                continue  # Spark skips them too
            if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                raise NeedsSpark("the source directory holds a subdirectory or a link")
            files.append(entry.path)
    else:
        raise NeedsSpark("the source path does not exist")  # Spark names the problem
    if not files:
        raise NeedsSpark("the source has no files")
    size = sum(os.path.getsize(f) for f in files)
    if size > max_bytes:
        raise NeedsSpark(f"the source has {size} bytes, more than {max_bytes}")
    try:
        schemas = [pq.read_schema(f) for f in files]
    except (OSError, ValueError) as err:  # (pyarrow's ArrowInvalid is a ValueError) Spark's path names the file
        raise NeedsSpark(f"a source file is not readable Parquet ({err})") from err
    if any(not s.equals(schemas[0]) for s in schemas[1:]):
        raise NeedsSpark("the source files differ in schema")
    names = [n.lower() for n in schemas[0].names]
    if len(set(names)) != len(names):
        raise NeedsSpark("the source has columns that differ only in case")
    return ArrowSource(tuple(files), schemas[0].remove_metadata(), size)


def unsupported(spec: TableSpec, source: ArrowSource, *, version: int | None, version_column: str | None,
                delete_column: str | None = None) -> str | None:
    """Why the upsert of `source` into a table of `spec` needs Spark (None: it does not). A source Spark would
    refuse (a missing key, a column the table lacks, a version that is no whole number) needs Spark too: its
    error is Spark's path's, word for word."""
    if not spec.primary_key:
        return "the table has no primary key"
    problem = arrow_writer.unsupported(spec)
    if problem is not None:
        return problem
    for col in spec.columns:  # (an absent value column is written as NULLs of its type)
        if not spark_hash.supported(col.type):
            return f"column {col.name!r} is {col.type}"
    fields = {f.name.lower(): f for f in source.schema}
    if delete_column is not None or "_delete" in fields:
        return "the source may have delete markers"
    column = version_column if version is None else None
    if version is None and column is None:
        column = spec.version_column
        if column is None:
            return "the upsert has no version"
    if column is not None:
        field = fields.get(column.lower())
        if field is None or str(field.type) not in _WIDER_INTS:
            return "the version column is missing or not a whole number"
    keys = [*spec.primary_key, *[c for c in spec.partition_columns if c not in spec.primary_key]]
    if any(k.lower() not in fields for k in keys):
        return "the source lacks a key column"
    for name, field in fields.items():
        if not spec.has_column(name):
            if column is not None and name == column.lower():
                continue
            return f"the source has column {field.name!r}, which the table lacks"
        target = spec.column(name)
        if not _converts(field.type, target.type):
            return f"source column {field.name!r} is {field.type}, the table's is {target.type}"
    for name in value_columns(spec):
        op = operator_of(spec, name)
        if type(op) not in merge_ops.BUILT_IN.values():
            return f"column {name!r} is merged by the plugin operator {op.name!r}"
        if op.qualified and spec.null_values.get(name) and spec.column(name).type != "string":
            return f"column {name!r} has null values and is not a string"
    return None


def _converts(source: pa.DataType, table_type: str) -> bool:
    """Whether a source column of Arrow type `source` becomes the table's type exactly (as Spark's cast does)."""
    import pyarrow as pa

    target = arrow_type(table_type)
    name = _SAME.get(str(source), str(source))
    if name == str(target):
        return True
    if name in _WIDER_INTS and str(target) in _WIDER_INTS:
        return _WIDER_INTS[name] <= _WIDER_INTS[str(target)]
    return bool(source == pa.float32() and target == pa.float64())


def arrow_upsert(table: TableMetadata, source: ArrowSource, *, version: Any = None, version_column: str | None = None,
                 replace_version: bool = False, request_id: str | None = None, base: TableState | None = None,
                 request_fingerprint: str | None = None, metadata: Mapping[str, Any] | None = None,
                 metrics: Mapping[str, Any] | None = None) -> Upserted:
    """`upsert.versioned_upsert` of the files of `source`, without Spark (the module docstring); raises
    `NeedsSpark` before anything is written when it cannot be done so."""
    base = table.state() if base is None else base
    spec = stored_spec(base.spec)
    if not spec.primary_key:
        raise NeedsSpark("the table has no primary key")  # (Spark's path names the fix)
    request = requests.Request(OPERATION, request_id, request_fingerprint)
    prior = requests.committed(table, request)
    if prior is not None:
        return Upserted(prior, True)
    fixed = None if version is None else versions_module.parse_version(version)
    if fixed is not None and version_column is not None:
        raise LakeSpecError("version", "give `version` or `version_column`, not both.", "Drop one.")
    problem = unsupported(spec, source, version=fixed, version_column=version_column)
    if problem is not None:
        raise NeedsSpark(problem)
    column = None if fixed is not None else (version_column or spec.version_column)
    rows, present, versions_array = _conform(source, spec, column, fixed)
    _check_rows(rows, spec, versions_array, column)
    fingerprinted = list(dict.fromkeys([*spec.primary_key, *spec.partition_columns, *present]))
    versions = sorted({int(v) for v in versions_array.tolist()}) if fixed is None else [fixed]
    if len(versions) > versions_module.MAX_VERSIONS_PER_UPSERT:
        raise LakeSpecError("version_column", f"the source has more than {versions_module.MAX_VERSIONS_PER_UPSERT} "
                            "distinct versions.", "Upsert fewer versions at once (a version is a batch).")
    fingerprint = _fingerprint(rows, spec, fingerprinted, versions_array)
    log.info("upsert of %d row(s), version(s) %s, without Spark (%d file(s), %d bytes)", rows.num_rows,
             versions if len(versions) <= 5 else f"{versions[0]}..{versions[-1]}", len(source.files), source.bytes)
    txn = begin(table, UPSERT_ACTION, OPERATION, request_id=request_id, base=base,
                request_fingerprint=request_fingerprint, metadata={"columns": present, **(metadata or {}),
                                                                   **request.metadata()})
    try:
        removed, prior = resolve_clash(table, txn.base, versions, present, fingerprint=fingerprint,
                                       replace=replace_version)
        if prior is not None and CONSUMED in (metadata or {}):
            return Upserted(txn.commit(metrics={**(metrics or {}), "duplicate_of": prior.seq}), False)
        if prior is not None:
            txn.abort(reason=f"a duplicate of instant {prior.instant} (log entry {prior.seq}: the same version(s) "
                             f"{versions} with the same data); nothing to write")
            log.info("upsert of version(s) %s is the same as instant %s: nothing written", versions, prior.instant)
            return Upserted(prior, True)
        physical = _physical_rows(rows, spec, present, versions_array)
        files = arrow_writer.write_arrow(physical, table.storage, physical_spec(spec), txn.instant,
                                         plain_columns=plain_keys(spec))
        written: dict[str, Any] = {**(metrics or {}), "query_exchanges": 0, "write_exchanges": 0, "spark": False}
        return commit_upsert(txn, files, removed, written, rows=rows.num_rows, versions=versions,
                             fingerprint=fingerprint, present=present)
    except BaseException:
        txn.abort()
        raise


def _conform(source: ArrowSource, spec: TableSpec, column: str | None, fixed: int | None
             ) -> tuple[pa.Table, list[str], np.ndarray]:
    """The source's rows with the table's column names and types (the key, partition and present value columns,
    and each row's order within the upsert as `__lake_seq`), the value columns present, and each row's version
    (int64, from `column` or `fixed`; a NULL one is refused)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    # (`ParquetFile.read`, not `read_table`: that loads pyarrow.dataset and pandas, ~0.9 s in a fresh task)
    pieces = [pq.ParquetFile(f).read() for f in source.files]
    read = pa.concat_tables(pieces).combine_chunks()
    by_lower = {name.lower(): name for name in read.column_names}
    present = [c for c in value_columns(spec) if c.lower() in by_lower]
    keys = [*spec.primary_key, *[c for c in spec.partition_columns if c not in spec.primary_key]]
    names = [c for c in spec.column_names if c in keys or c in present]
    arrays = [read.column(by_lower[c.lower()]).cast(arrow_type(spec.column(c).type)) for c in names]
    # the row's order within the upsert: Spark's monotonically_increasing_id with one task per file
    seq = np.concatenate([(np.int64(i) << np.int64(33)) + np.arange(piece.num_rows, dtype=np.int64)
                          for i, piece in enumerate(pieces)])
    rows = pa.table([*arrays, pa.array(seq, pa.int64())], names=[*names, SEQ])
    if fixed is not None:
        return rows, present, np.full(rows.num_rows, fixed, dtype=np.int64)
    assert column is not None
    values = read.column(by_lower[column.lower()]).cast(pa.int64())
    nulls = values.null_count
    if nulls:
        raise LakeSchemaError(f"{nulls} row(s) have no version (NULL in {column!r}); nothing was committed. Fix: "
                              "fill the version column, or give `version`.")
    return rows, present, values.to_numpy()


def _check_rows(rows: pa.Table, spec: TableSpec, versions: np.ndarray, column: str | None) -> None:
    """Refuse, before anything is written, what Spark's path refuses in its write: NULL keys, and partition values
    Spark cannot write (the same messages)."""
    import pyarrow.compute as pc

    from airflow_lake.lake.spark.file_writer import not_null_message

    for col in spec.columns:  # NOT NULL columns (the key's always): NULL in the source, or absent from it
        if col.nullable or col.name in spec.partition_columns:
            continue
        if col.name not in rows.column_names or rows.column(col.name).null_count:
            raise LakeSchemaError(not_null_message(col.name))
    for name in spec.partition_columns:
        values = rows.column(name)
        if values.null_count and not spec.column(name).nullable:
            raise LakeSchemaError(not_null_message(name))
        if spec.column(name).type != "string":
            continue
        for value in pc.unique(values).to_pylist():
            if value is None:
                continue
            if value == "":
                raise LakeSchemaError(empty_partition_message(name))
            if value == NULL_PARTITION:
                raise LakeSchemaError(null_name_problem(name))
            if len(name) + 1 + len(escape(value).encode()) > MAX_SEGMENT_BYTES:
                raise LakeSchemaError(too_long_message(name))
            check_partition_value(name, value, "source")


def _fingerprint(rows: pa.Table, spec: TableSpec, columns: Sequence[str], versions: np.ndarray) -> str:
    """`versions.fingerprint` of what Spark's `fingerprint_aggregates` observe: xxhash64 of (columns, version)."""
    import numpy as np
    import pyarrow as pa

    hashed = spark_hash.xxhash64([*[rows.column(c) for c in columns], pa.array(versions, pa.int64())],
                                 [*[spec.column(c).type for c in columns], "bigint"]).view(np.uint64)
    with np.errstate(over="ignore"):
        low = int((hashed & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64))
        high = int((hashed >> np.uint64(32)).sum(dtype=np.uint64))
    xor = int(np.bitwise_xor.reduce(hashed)) if len(hashed) else 0
    return versions_module.fingerprint({"rows": rows.num_rows, "low": low, "high": high, "xor": xor})


def _physical_rows(rows: pa.Table, spec: TableSpec, present: Sequence[str], versions: np.ndarray) -> pa.Table:
    """The rows as the files hold them (`physical.delta_rows` without deletes): every table column (absent value
    columns NULL), each value column's stamps, the row's order within the upsert and its version."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = rows.num_rows
    version = pa.array(versions, pa.int64())
    no_version = pa.nulls(count, pa.int64())
    out: dict[str, pa.Array | pa.ChunkedArray] = {}
    stamps: dict[str, pa.Array | pa.ChunkedArray] = {}
    for col in spec.columns:
        name = col.name
        keyed = name in spec.primary_key or name in spec.partition_columns
        given = keyed or name in present
        value = rows.column(name) if given else pa.nulls(count, arrow_type(col.type))
        out[name] = value
        if keyed:
            continue
        op = operator_of(spec, name)
        if not op.stamped:  # the range of versions folded into the value: a value's own version (sum skips NULL)
            folded = pc.if_else(pc.is_valid(value), version, no_version) if given else no_version
            stamps[version_of(name)] = folded
            stamps[oldest_of(name)] = folded
            continue
        stamps[version_of(name)] = version if given else no_version
        if op.qualified:
            stamps[qualified_of(name)] = _qualifies(value, spec.null_values.get(name, ())) if given else \
                pa.nulls(count, pa.bool_())
    out.update(stamps)
    out[SEQ] = rows.column(SEQ)  # (`_conform`)
    out[NEWEST] = version
    out[OLDEST] = version
    out[DELETED] = no_version
    return pa.table(out)


def _qualifies(value: pa.ChunkedArray | pa.Array, null_values: Sequence[str]) -> pa.ChunkedArray | pa.Array:
    """`LastNonNull.qualifies`: not NULL and (a string column) not one of `null_values`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    condition = pc.is_valid(value)
    if null_values:
        condition = pc.and_(condition, pc.invert(pc.fill_null(pc.is_in(value, value_set=pa.array(
            list(null_values), pa.string())), False)))
    return pc.fill_null(condition, False)
