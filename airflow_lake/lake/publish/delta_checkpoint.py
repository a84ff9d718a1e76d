"""Checkpoints of the published Delta log: the table at one version in one Parquet file (Delta's classic
checkpoint: one row per action, `protocol`, `metaData` and an `add` per visible file), and `_last_checkpoint`.

A reader then reads one file and the versions after it instead of every version: a table of 100,000 files is
opened at the cost of one Parquet read. Written every `checkpoint.interval` versions (the interval our own log
uses), at the start of the log `clean` leaves (older versions are then deleted, as Delta's log cleanup does), and
where a publish has to start after entries `clean` expired (a first publish of an old table, or a publisher that
was off for longer than the log's retention): the log then starts at that checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.format import instants
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.publish import delta_actions, delta_log
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    import pyarrow as pa


def _schema() -> pa.Schema:
    import pyarrow as pa

    strings = pa.map_(pa.string(), pa.string())
    names = pa.list_(pa.field("element", pa.string(), nullable=False))
    deletion_vector = pa.struct([pa.field("storageType", pa.string(), False), pa.field("pathOrInlineDv", pa.string(),
                                 False), ("offset", pa.int32()), pa.field("sizeInBytes", pa.int32(), False),
                                 pa.field("cardinality", pa.int64(), False)])
    add = pa.struct([pa.field("path", pa.string(), False), pa.field("partitionValues", strings, False),
                     pa.field("size", pa.int64(), False), pa.field("modificationTime", pa.int64(), False),
                     pa.field("dataChange", pa.bool_(), False), ("stats", pa.string()), ("tags", strings),
                     ("deletionVector", deletion_vector)])
    remove = pa.struct([pa.field("path", pa.string(), False), ("deletionTimestamp", pa.int64()),
                        pa.field("dataChange", pa.bool_(), False), ("extendedFileMetadata", pa.bool_()),
                        ("partitionValues", strings), ("size", pa.int64()), ("stats", pa.string()), ("tags", strings),
                        ("deletionVector", deletion_vector)])
    meta = pa.struct([pa.field("id", pa.string(), False), ("name", pa.string()), ("description", pa.string()),
                      pa.field("format", pa.struct([pa.field("provider", pa.string(), False),
                                                    pa.field("options", strings, False)]), False),
                      pa.field("schemaString", pa.string(), False), pa.field("partitionColumns", names, False),
                      ("createdTime", pa.int64()), pa.field("configuration", strings, False)])
    protocol = pa.struct([pa.field("minReaderVersion", pa.int32(), False),
                          pa.field("minWriterVersion", pa.int32(), False), ("readerFeatures", names),
                          ("writerFeatures", names)])
    txn = pa.struct([pa.field("appId", pa.string(), False), pa.field("version", pa.int64(), False),
                     ("lastUpdated", pa.int64())])
    return pa.schema([("add", add), ("remove", remove), ("metaData", meta), ("protocol", protocol), ("txn", txn)])


def added_ms(data_file: DataFile) -> int:
    """When a file was added, as near as a state knows (the start of the instant that wrote it)."""
    try:
        return instants.id_millis(data_file.instant)
    except ValueError:
        return 0


def _pairs(mapping: dict[str, Any]) -> list[tuple[str, Any]]:
    return list(mapping.items())


def write(storage: Storage, version: int, protocol: dict[str, Any], metadata: dict[str, Any], spec: TableSpec, *,
          files: Iterable[DataFile]) -> int:
    """Write the checkpoint of `version` (the table then: `protocol`, `metadata`, `files`) and point
    `_last_checkpoint` at it unless it names a newer one; the number of actions."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = dict(metadata)
    meta["format"] = {"provider": meta["format"]["provider"], "options": _pairs(meta["format"]["options"])}
    meta["configuration"] = _pairs(meta["configuration"])
    meta.setdefault("description", None)
    rows: list[dict[str, Any]] = [{"protocol": protocol}, {"metaData": meta}]
    plan = delta_actions.StatsPlan(spec)
    times: dict[str, int] = {}  # instant -> its time: files share instants
    for data_file in files:
        if data_file.instant not in times:
            times[data_file.instant] = added_ms(data_file)
        body = delta_actions.add(data_file, spec, times[data_file.instant], data_change=False, plan=plan)["add"]
        body["partitionValues"] = _pairs(body["partitionValues"])
        rows.append({"add": body})
    table = pa.Table.from_pylist(rows, schema=_schema())
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    storage.write_bytes(delta_log.checkpoint_file(version), sink.getvalue().to_pybytes())
    if delta_log.checkpoint_version(storage) < version:
        storage.write_bytes(delta_log.LAST_CHECKPOINT,
                            json.dumps({"version": version, "size": len(rows),
                                        "numOfAddFiles": len(rows) - 2}).encode())
    return len(rows)
