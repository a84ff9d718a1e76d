"""Checkpoints: the folded table state in one Parquet file, whose per-file stats are decoded only when used.

`_lake/checkpoints/<seq:020d>.parquet` holds the state after log entry `seq` (`state.TableState`):

* one row per live file, sorted by path: `path`, `partition` (compact JSON, dictionary-encoded: a table has
  few distinct partitions), `rows`, `bytes`, `bucket`, `instant` (dictionary-encoded), and for the i-th stats
  key a column `stats_<i>`, a struct `{min, max, nulls}` that is null where the file has no stats for it
  (`stats_columns.py`);
* then one row per tombstone: `path`, `removed_seq`, `removed_at` (the other columns null);
* the small rest of the state (spec, the instant / request / rollback / upsert version / spec change indexes,
  the consumed positions (`consumed.py`; absent: none, as in checkpoints written before them), `cleaned_before`,
  `completed_at`, `seq`, the stats keys and how their values are typed) as JSON in the file's key-value metadata
  under `lake.state`, with its CRC-32 under `lake.state.crc32`.

Pages carry CRC-32 checksums, verified on every read. Opening a checkpoint decodes every column except the
stats, which its files read lazily (`stats_columns.py`): a snapshot without filters never pays for stats,
and a filter on `c1` only for `c1`.

Checkpoints are an optimisation; the log is the truth — until `clean` expires log entries older than the log
retention (`log.retain.hours`): then the checkpoint at the log's start is where its history starts, and `retain`
keeps it, besides the newest `checkpoint.retain.count` (the rule is `history.py`'s, which `clean` follows too).
Before Parquet they were JSON (`<seq:020d>.json`, `TableState.to_dict`), which is still read. The bytes are built
in memory and written with one atomic replace, then `_lake/_last_checkpoint.json` (the pointer a log opens from)
names them.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lake.lake.format import history, paths
from airflow_lake.lake.format.consumed import CONSUMED, positions_of
from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.gc_pause import cyclic_gc_paused
from airflow_lake.lake.format.identity import TABLE_ID
from airflow_lake.lake.format.stats_columns import (
    UNREADABLE,
    LazyStats,
    StatsColumns,
    StatsOf,
    column_name,
    stats_arrays,
)
from airflow_lake.lake.format.storage import Storage, loads
from airflow_lake.lake.format.table_state import (
    TableState,
    spec_changes_from,
    table_id_from,
    versions_from_pairs,
    versions_to_pairs,
)

__all__ = ["UNREADABLE", "cyclic_gc_paused", "decode", "encode", "listed", "read", "retain", "write"]
PARQUET_FORMAT = 2  # `format` in `lake.state`; 1 is the JSON form of `TableState.to_dict`
STATE_KEY = b"lake.state"
CRC_KEY = b"lake.state.crc32"
CORE_COLUMNS = ("path", "partition", "rows", "bytes", "bucket", "instant", "removed_seq", "removed_at")
OPTIONAL_COLUMNS = ("bucketing",)


# -- writing ---------------------------------------------------------------------------------------


def write(storage: Storage, state: TableState, *, point: bool = True) -> int:
    """Write `state` as the Parquet checkpoint of its seq, then (`point`) point the pointer at it; returns its size.
    (`clean` writes the checkpoint its log expiry starts from without `point`: it is not the newest.)"""
    data = encode(state)
    storage.write_bytes(paths.checkpoint_file(state.seq), data)  # atomic: temporary file, then rename
    if point:
        storage.write_json(paths.LAST_CHECKPOINT, {"seq": state.seq, "format": "parquet", "bytes": len(data),
                                                   "files": len(state.files), "tombstones": len(state.tombstones)})
    return len(data)


def encode(state: TableState) -> bytes:
    """The Parquet bytes of a checkpoint of `state`."""
    files = sorted(state.files.values(), key=lambda f: f.path)
    tombstones = sorted(state.tombstones.items())
    gap: list[None] = [None] * len(tombstones)
    columns: dict[str, pa.Array] = {
        "path": pa.array([f.path for f in files] + [p for p, _ in tombstones], pa.string()),
        "partition": pa.array(_partition_texts(files) + gap, pa.string()),
        "rows": pa.array([f.rows for f in files] + gap, pa.int64()),
        "bytes": pa.array([f.bytes for f in files] + gap, pa.int64()),
        "bucket": pa.array([f.bucket for f in files] + gap, pa.int64()),
        "instant": pa.array([f.instant for f in files] + gap, pa.string()),
        "bucketing": pa.array([f.bucketing for f in files] + gap, pa.string()),
        "removed_seq": pa.array([None] * len(files) + [int(t[0]) for _, t in tombstones], pa.int64()),
        "removed_at": pa.array([None] * len(files) + [float(t[1]) for _, t in tombstones], pa.float64()),
    }
    keys: list[list[str]] = []
    for i, (key, encoding, array) in enumerate(stats_arrays(files, len(tombstones))):
        keys.append([key, encoding])
        columns[column_name(i)] = array
    meta = {
        "format": PARQUET_FORMAT, "seq": state.seq, "instant": state.instant, "spec": state.spec,
        "instants": state.instants, "requests": state.requests, "rolled_back": state.rolled_back,
        "cleaned_before": state.cleaned_before, "completed_at": state.completed_at,
        "files": len(files), "tombstones": len(tombstones), "stats": keys,
    }
    if state.versions is not None:
        meta["versions"] = versions_to_pairs(state.versions)
    if state.spec_changes is not None:
        meta["spec_changes"] = state.spec_changes
    if state.table_id is not None:
        meta[TABLE_ID] = state.table_id
    if state.consumed:
        meta[CONSUMED] = dict(state.consumed)
    text = json.dumps(meta, separators=(",", ":"), sort_keys=True, default=str).encode()
    table = pa.Table.from_arrays(list(columns.values()), names=list(columns))
    table = table.replace_schema_metadata({STATE_KEY: text, CRC_KEY: str(zlib.crc32(text)).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", use_dictionary=["partition", "instant", "bucketing"],
                   write_statistics=False, write_page_checksum=True)
    return bytes(sink.getvalue())


def _partition_texts(files: Sequence[DataFile]) -> list[str]:
    texts: dict[tuple[tuple[str, str | None], ...], str] = {}
    out = []
    for data_file in files:
        key = tuple(data_file.partition.items())
        text = texts.get(key)
        if text is None:
            text = texts[key] = json.dumps(dict(sorted(key)), separators=(",", ":"))
        out.append(text)
    return out


# -- retention -------------------------------------------------------------------------------------


def listed(storage: Storage) -> list[tuple[int, str]]:
    """The checkpoints on storage as (seq, format), newest first; at one seq, Parquet before JSON."""
    rank = {fmt: i for i, fmt in enumerate(paths.CHECKPOINT_FORMATS)}
    found = (c for c in map(paths.checkpoint_of, storage.list_dir(paths.CHECKPOINTS)) if c is not None)
    return sorted(found, key=lambda c: (-c[0], rank[c[1]]))


def retain(storage: Storage, keep: int, start: Callable[[], int]) -> list[str]:
    """Delete the checkpoints (either format) that `history.kept_checkpoints` does not keep: all but the newest
    `keep`, the one at the log's `start()` and the one a clean is moving the start to; returns the deleted names.

    The checkpoints are listed before the clean's mark is read (see `history`), and `start` is asked last.
    """
    found = listed(storage)
    starting = history.marked_start(storage)
    kept = history.kept_checkpoints({seq for seq, _ in found}, keep, start(), starting)
    deleted = [os.path.basename(paths.checkpoint_file(seq, fmt)) for seq, fmt in reversed(found) if seq not in kept]
    for name in deleted:
        storage.delete(f"{paths.CHECKPOINTS}/{name}")
    return deleted


# -- reading ---------------------------------------------------------------------------------------


def read(storage: Storage, seq: int, fmt: str, recover: Callable[[], StatsOf] | None = None) -> TableState:
    """The state stored in checkpoint `seq` of format `fmt`; raises FileNotFoundError or one of `UNREADABLE`, or
    `LakeUnsafePath` if it names a path outside the table's data area (`paths.confined`).

    `recover` gives the stats of the checkpoint's files from elsewhere (the log) should its stats columns turn
    out to be unreadable when they are first used.
    """
    data = storage.read_bytes(paths.checkpoint_file(seq, fmt))
    state = TableState.from_dict(json.loads(data)) if fmt == "json" else decode(data, recover)
    if state.seq != seq:
        raise ValueError(f"checkpoint {seq} holds the state of entry {state.seq}")
    # every path it holds inside the table's data area, or `LakeUnsafePath` naming it (readers then fold the log)
    source = f"checkpoint {storage.url}/{paths.checkpoint_file(seq, fmt)}"
    paths.confined(state.files, f"{source} (files)")
    paths.confined(state.tombstones, f"{source} (tombstones)")
    return state


def decode(data: bytes, recover: Callable[[], StatsOf] | None = None) -> TableState:
    """Inverse of `encode`, except that the files' stats are decoded lazily."""
    source = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)), page_checksum_verification=True,
                            read_dictionary=["partition", "instant", "bucketing"])
    meta_kv = source.metadata.metadata or {}
    text = meta_kv[STATE_KEY]
    if str(zlib.crc32(text)).encode() != meta_kv.get(CRC_KEY):
        raise ValueError("the checkpoint's state metadata fails its checksum")
    meta = loads(text)  # (msgspec when there: the instant and request indexes of 100,000 entries take 50 ms in json)
    if meta.get("format") != PARQUET_FORMAT:
        raise ValueError(f"unknown checkpoint format {meta.get('format')!r}")
    # `bucketing` came later: checkpoints without it hold files that all have the spec's bucketing
    optional = [c for c in OPTIONAL_COLUMNS if c in source.schema_arrow.names]
    table = source.read(columns=[*CORE_COLUMNS, *optional])
    n_files, n_tombstones = int(meta["files"]), int(meta["tombstones"])
    if table.num_rows != n_files + n_tombstones or table.column("removed_seq").null_count != n_files:
        raise ValueError("the checkpoint's rows do not match its metadata")
    with cyclic_gc_paused():
        # the files' columns only for the files' rows: a table long without a clean has many more tombstones
        held, gone = table.slice(0, n_files), table.slice(n_files)
        live = held.column("path").to_pylist()
        partitions = _dictionary_values(held.column("partition"), json.loads)
        instants = _dictionary_values(held.column("instant"), str)
        rows = held.column("rows").to_pylist()
        sizes = held.column("bytes").to_pylist()
        buckets = held.column("bucket").to_pylist()
        bucketings = _dictionary_values(held.column("bucketing"), str) if "bucketing" in optional \
            else [None] * n_files
        stats = StatsColumns(source, [(str(k), str(e)) for k, e in meta["stats"]], live, recover)
        files = {path: DataFile(path, partitions[i], rows[i], sizes[i], buckets[i], instants[i],
                                LazyStats(stats, i), bucketings[i]) for i, path in enumerate(live)}
        tombstones = dict(zip(gone.column("path").to_pylist(),
                              map(list, zip(gone.column("removed_seq").to_pylist(),
                                            gone.column("removed_at").to_pylist(), strict=True)), strict=True))
    return TableState(int(meta["seq"]), str(meta["instant"]), dict(meta["spec"]), files, tombstones,
                      dict(meta["instants"]), dict(meta["requests"]), dict(meta["rolled_back"]),
                      int(meta["cleaned_before"]), float(meta["completed_at"]),
                      versions_from_pairs(meta.get("versions")),  # absent: written before the index
                      spec_changes_from(meta.get("spec_changes")),  # (the same)
                      table_id_from(meta.get(TABLE_ID)),  # absent: a table (or checkpoint) from before ids
                      positions_of(meta.get(CONSUMED)))  # absent: nothing consumed (or a checkpoint from before)


def _dictionary_values(column: pa.ChunkedArray, parse: Callable[[Any], Any]) -> list[Any]:
    """The values of a dictionary-encoded column, each distinct value parsed once and shared by its rows."""
    cache: dict[str, Any] = {}
    out: list[Any] = []
    for chunk in column.chunks:
        values = []
        for text in chunk.dictionary.to_pylist():
            if text not in cache:
                cache[text] = parse(text)
            values.append(cache[text])
        out.extend(None if i is None else values[i] for i in chunk.indices.to_pylist())
    return out
