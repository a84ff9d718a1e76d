"""write: append to or overwrite a lake table from files or a Spark SQL query over lake tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_lake.jobs.fields import SpecReader
from airflow_lake.jobs.ops.common import entry_metrics, table_path
from airflow_lake.jobs.registry import Operation, register
from airflow_lake.lake import write as lake_write
from airflow_lake.lake.errors import LakeSpecError
from airflow_lake.lake.source_files import source_error
from airflow_lake.lake.sources import Source, load
from airflow_lake.lake.table import LakeTable


@dataclass(frozen=True)
class WriteSpec:
    """Validated write spec."""

    table: str
    source: Source
    mode: str
    partitions: list[Mapping[str, Any]] | str | None
    request_id: str | None
    max_exchanges: int | None = None


def parse(raw: Mapping[str, Any]) -> WriteSpec:
    """Validate a write spec (shape only; values are checked against the table when it runs)."""
    reader = SpecReader(raw, "write")
    table = table_path(reader)
    if not reader.has("source"):
        raise LakeSpecError("source", "the write operation needs a `source`.",
                            "Give {'path': ..., 'format': ...} or {'query': ..., 'tables': {...}}.")
    source = Source.from_dict(reader.raw_value("source"))
    mode = reader.choice("mode", lake_write.MODES, "append")
    partitions = reader.raw_value("partitions")
    if partitions is not None and mode != "overwrite":
        raise LakeSpecError("partitions", "partitions apply to overwrite only.", "Set mode to 'overwrite'.")
    if isinstance(partitions, str) and partitions != lake_write.DYNAMIC:
        raise LakeSpecError("partitions", f"{partitions!r} is not allowed.",
                            "Give a list of partitions or 'dynamic'.")
    request_id = reader.string("request_id")
    limit = reader.number("max_exchanges")
    if limit is not None and limit != int(limit):
        raise LakeSpecError("max_exchanges", f"{limit!r} is not a whole number.", "Give 0 for a shuffle-free step.")
    max_exchanges = None if limit is None else int(limit)
    reader.done()
    return WriteSpec(table, source, mode, partitions, request_id, max_exchanges)


def execute(spark: Any, spec: WriteSpec) -> dict[str, Any]:
    """Run the write; a retry with the same request_id returns the first run's metrics."""
    table = LakeTable.open(spec.table)
    lake_write.normalize_partitions(table.spec, spec.partitions)  # fail before reading the source
    prior = table.find_request(spec.request_id, "write") if spec.request_id else None
    if prior is not None:
        return entry_metrics(table.url, "write", prior, already_committed=True)
    scans: dict[str, dict[str, int]] = {}
    df, reads = load(spark, spec.source, table.spec, scans)
    try:
        entry = lake_write.write(table, df, mode=spec.mode, partitions=spec.partitions, request_id=spec.request_id,
                                 reads=reads.get(table.url, ()), metadata={"source": spec.source.describe()},
                                 metrics={"source_scans": scans} if scans else None,
                                 max_exchanges=spec.max_exchanges)
    except Exception as err:  # a source file Spark refused mid-write, as a clear error
        clear = source_error(err)
        if clear is None:
            raise
        raise clear from err
    return entry_metrics(table.url, "write", entry, already_committed=False)


register(Operation("write", parse, execute, summary="append or overwrite from files or a query"))
