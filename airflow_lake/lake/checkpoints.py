"""Checkpoints: the folded table state in one Parquet file, whose per-file stats are decoded only when used.

`_lake/checkpoints/<seq:020d>.parquet` holds the state after log entry `seq` (`state.TableState`):

* one row per live file, sorted by path: `path`, `partition` (compact JSON, dictionary-encoded: a table has
  few distinct partitions), `rows`, `bytes`, `bucket`, `instant` (dictionary-encoded), and for the i-th stats
  key a column `stats_<i>`, a struct `{min, max, nulls}` that is null where the file has no stats for it;
* then one row per tombstone: `path`, `removed_seq`, `removed_at` (the other columns null);
* the small rest of the state (spec, the instant / request / rollback indexes, `cleaned_before`,
  `completed_at`, `seq`, the stats keys and how their values are typed) as JSON in the file's key-value
  metadata under `lake.state`, with its CRC-32 under `lake.state.crc32`.

Pages carry CRC-32 checksums, verified on every read. Opening a checkpoint decodes every column except the
stats: each file's `DataFile.stats` is a `LazyStats` view on a `StatsColumns` shared by the whole checkpoint,
which decodes a stats key's column for all files on its first use. So a snapshot without filters never pays
for stats, and a filter on `c1` only for `c1`.

Checkpoints are an optimisation; the log is the truth. Before Parquet they were JSON
(`<seq:020d>.json`, `TableState.to_dict`), which is still read. The bytes are built in memory and written
with one atomic replace; older checkpoints beyond `checkpoint.retain.count` are then deleted (`retain`).
"""

from __future__ import annotations

import json
import logging
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lake.lake import paths
from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.files import ColumnStats, DataFile
from airflow_lake.lake.state import TableState
from airflow_lake.lake.storage import Storage

log = logging.getLogger(__name__)

PARQUET_FORMAT = 2  # `format` in `lake.state`; 1 is the JSON form of `TableState.to_dict`
STATE_KEY = b"lake.state"
CRC_KEY = b"lake.state.crc32"
CORE_COLUMNS = ("path", "partition", "rows", "bytes", "bucket", "instant", "removed_seq", "removed_at")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# How min/max values of one stats key are stored: typed when every value has the same Python type, else as
# JSON text per value (so a checkpoint gives back exactly the values that went in).
_ARROW_TYPES: dict[str, pa.DataType] = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(),
                                        "string": pa.string(), "json": pa.string()}
# What a damaged or foreign checkpoint raises while being read: it is then skipped (`pa.ArrowInvalid` is a
# ValueError, `pa.ArrowIOError` an OSError; a failed page checksum is an OSError).
UNREADABLE = (OSError, ValueError, KeyError, TypeError, IndexError, pa.ArrowException, LakeError)

StatsOf = Mapping[str, Mapping[str, ColumnStats]]  # path -> stats


# -- writing ---------------------------------------------------------------------------------------


def write(storage: Storage, state: TableState) -> int:
    """Write `state` as the Parquet checkpoint of its seq, then point the hint at it; returns its size."""
    data = encode(state)
    storage.write_bytes(paths.checkpoint_file(state.seq), data)  # atomic: temporary file, then rename
    storage.write_json(paths.LAST_CHECKPOINT, {"seq": state.seq, "format": "parquet", "bytes": len(data),
                                               "files": len(state.files), "tombstones": len(state.tombstones)})
    return len(data)


def encode(state: TableState) -> bytes:
    """The Parquet bytes of a checkpoint of `state`."""
    files = sorted(state.files.values(), key=lambda f: f.path)
    tombstones = sorted(state.tombstones.items())
    total = len(files) + len(tombstones)
    gap: list[None] = [None] * len(tombstones)
    columns: dict[str, pa.Array] = {
        "path": pa.array([f.path for f in files] + [p for p, _ in tombstones], pa.string()),
        "partition": pa.array(_partition_texts(files) + gap, pa.string()),
        "rows": pa.array([f.rows for f in files] + gap, pa.int64()),
        "bytes": pa.array([f.bytes for f in files] + gap, pa.int64()),
        "bucket": pa.array([f.bucket for f in files] + gap, pa.int64()),
        "instant": pa.array([f.instant for f in files] + gap, pa.string()),
        "removed_seq": pa.array([None] * len(files) + [int(t[0]) for _, t in tombstones], pa.int64()),
        "removed_at": pa.array([None] * len(files) + [float(t[1]) for _, t in tombstones], pa.float64()),
    }
    keys: list[list[str]] = []
    for i, (key, triples) in enumerate(_stats_by_key(files, total).items()):
        encoding, array = _stats_column(triples)
        keys.append([key, encoding])
        columns[f"stats_{i}"] = array
    meta = {
        "format": PARQUET_FORMAT, "seq": state.seq, "instant": state.instant, "spec": state.spec,
        "instants": state.instants, "requests": state.requests, "rolled_back": state.rolled_back,
        "cleaned_before": state.cleaned_before, "completed_at": state.completed_at,
        "files": len(files), "tombstones": len(tombstones), "stats": keys,
    }
    text = json.dumps(meta, separators=(",", ":"), sort_keys=True, default=str).encode()
    table = pa.table(columns).replace_schema_metadata({STATE_KEY: text, CRC_KEY: str(zlib.crc32(text)).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", use_dictionary=["partition", "instant"],
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


def _stats_by_key(files: Sequence[DataFile], total: int) -> dict[str, list[tuple[Any, Any, int] | None]]:
    """Per stats key, one (min, max, nulls) per row (None where a file has none, and for tombstone rows)."""
    out: dict[str, list[tuple[Any, Any, int] | None]] = {}
    for row, data_file in enumerate(files):
        stats = data_file.stats
        items = stats.raw_items() if isinstance(stats, LazyStats) else (
            (k, (v.min, v.max, v.null_count)) for k, v in stats.items())
        for key, triple in items:
            column = out.get(key)
            if column is None:
                column = out[key] = [None] * total
            column[row] = triple
    return out


def _stats_column(triples: list[tuple[Any, Any, int] | None]) -> tuple[str, pa.StructArray]:
    present = [t for t in triples if t is not None]
    mins = [None if t is None else t[0] for t in triples]
    maxs = [None if t is None else t[1] for t in triples]
    nulls = pa.array([None if t is None else int(t[2]) for t in triples], pa.int64())
    mask = pa.array([t is None for t in triples], pa.bool_())
    encoding = _encoding([v for t in present for v in (t[0], t[1]) if v is not None])
    if encoding != "json":
        try:
            low, high = pa.array(mins, _ARROW_TYPES[encoding]), pa.array(maxs, _ARROW_TYPES[encoding])
        except (pa.ArrowException, UnicodeError):  # e.g. a string that is not valid Unicode
            encoding = "json"
    if encoding == "json":
        low, high = (pa.array([None if v is None else json.dumps(v, default=str) for v in values], pa.string())
                     for values in (mins, maxs))
    return encoding, pa.StructArray.from_arrays([low, high, nulls], names=["min", "max", "nulls"], mask=mask)


def _encoding(values: list[Any]) -> str:
    kinds = {type(v) for v in values}
    if not kinds or kinds == {str}:
        return "string"
    if kinds == {bool}:
        return "bool"
    if kinds == {float}:
        return "float"
    if kinds == {int} and min(values) >= INT64_MIN and max(values) <= INT64_MAX:
        return "int"
    return "json"


# -- retention -------------------------------------------------------------------------------------


def retain(storage: Storage, keep: int) -> list[str]:
    """Delete all but the newest `keep` checkpoints (by seq, either format); returns the deleted names.

    Snapshots older than the oldest kept checkpoint still resolve, by folding the log from entry 0.
    """
    found = sorted((c, name) for name in storage.list_dir(paths.CHECKPOINTS)
                   if (c := paths.checkpoint_of(name)) is not None)
    kept = sorted({seq for (seq, _), _ in found}, reverse=True)[:max(1, keep)]
    deleted = [name for (seq, _), name in found if seq < kept[-1]] if kept else []
    for name in deleted:
        storage.delete(f"{paths.CHECKPOINTS}/{name}")
    return deleted


# -- reading ---------------------------------------------------------------------------------------


def read(storage: Storage, seq: int, fmt: str, recover: Callable[[], StatsOf] | None = None) -> TableState:
    """The state stored in checkpoint `seq` of format `fmt`; raises FileNotFoundError or one of `UNREADABLE`.

    `recover` gives the stats of the checkpoint's files from elsewhere (the log) should its stats columns turn
    out to be unreadable when they are first used.
    """
    data = storage.read_bytes(paths.checkpoint_file(seq, fmt))
    state = TableState.from_dict(json.loads(data)) if fmt == "json" else decode(data, recover)
    if state.seq != seq:
        raise ValueError(f"checkpoint {seq} holds the state of entry {state.seq}")
    return state


def decode(data: bytes, recover: Callable[[], StatsOf] | None = None) -> TableState:
    """Inverse of `encode`, except that the files' stats are decoded lazily."""
    source = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)), page_checksum_verification=True,
                            read_dictionary=["partition", "instant"])
    meta_kv = source.metadata.metadata or {}
    text = meta_kv[STATE_KEY]
    if str(zlib.crc32(text)).encode() != meta_kv.get(CRC_KEY):
        raise ValueError("the checkpoint's state metadata fails its checksum")
    meta = json.loads(text)
    if meta.get("format") != PARQUET_FORMAT:
        raise ValueError(f"unknown checkpoint format {meta.get('format')!r}")
    table = source.read(columns=list(CORE_COLUMNS))
    n_files, n_tombstones = int(meta["files"]), int(meta["tombstones"])
    if table.num_rows != n_files + n_tombstones or table.column("removed_seq").null_count != n_files:
        raise ValueError("the checkpoint's rows do not match its metadata")
    path_list = table.column("path").to_pylist()
    partitions = _dictionary_values(table.column("partition"), json.loads)
    instants = _dictionary_values(table.column("instant"), str)
    rows = table.column("rows").to_pylist()
    sizes = table.column("bytes").to_pylist()
    buckets = table.column("bucket").to_pylist()
    live = path_list[:n_files]
    stats = StatsColumns(source, [(str(k), str(e)) for k, e in meta["stats"]], live, recover)
    files = {path: DataFile(path, partitions[i], rows[i], sizes[i], buckets[i], instants[i], LazyStats(stats, i))
             for i, path in enumerate(live)}
    removed_seq = table.column("removed_seq").to_pylist()[n_files:]
    removed_at = table.column("removed_at").to_pylist()[n_files:]
    tombstones = {path: [removed_seq[i], removed_at[i]] for i, path in enumerate(path_list[n_files:])}
    return TableState(int(meta["seq"]), str(meta["instant"]), dict(meta["spec"]), files, tombstones,
                      dict(meta["instants"]), dict(meta["requests"]), dict(meta["rolled_back"]),
                      int(meta["cleaned_before"]), float(meta["completed_at"]))


def _dictionary_values(column: pa.ChunkedArray, parse: Callable[[Any], Any]) -> list[Any]:
    """The values of a dictionary-encoded column, each distinct value parsed once and shared by its rows."""
    cache: dict[str, Any] = {}
    out: list[Any] = []
    for chunk in column.chunks:
        values = [None if text is None else cache.setdefault(text, parse(text))
                  for text in chunk.dictionary.to_pylist()]
        out.extend(None if i is None else values[i] for i in chunk.indices.to_pylist())
    return out


# -- lazy stats ------------------------------------------------------------------------------------


class StatsColumns:
    """The stats columns of one checkpoint, shared by its files, each decoded for all files on first use."""

    def __init__(self, source: pq.ParquetFile, keys: Sequence[tuple[str, str]], paths_: Sequence[str],
                 recover: Callable[[], StatsOf] | None) -> None:
        self._source: pq.ParquetFile | None = source
        self._columns = {key: (f"stats_{i}", encoding) for i, (key, encoding) in enumerate(keys)}
        self._decoded: dict[str, tuple[list[bool], list[Any], list[Any], list[int]]] = {}
        self._paths = paths_
        self._recover = recover
        self._recovered: StatsOf | None = None
        self._lock = threading.Lock()
        self.loads = 0  # stats columns decoded so far

    @property
    def keys(self) -> list[str]:
        """Every stats key of the checkpoint."""
        return list(self._columns)

    def get(self, row: int, key: str) -> ColumnStats | None:
        """The stats of `key` in the file of `row`, None if it has none."""
        if key not in self._columns:
            return None
        column = self._decoded.get(key) or self._decode(key)
        if column is None:
            return self._from_recovered(row).get(key)
        valid, mins, maxs, nulls = column
        return ColumnStats(mins[row], maxs[row], nulls[row]) if valid[row] else None

    def raw(self, row: int, key: str) -> tuple[Any, Any, int] | None:
        """(min, max, nulls) of `key` in the file of `row` without building a ColumnStats; None if none."""
        column = self._decoded.get(key) or self._decode(key)
        if column is None:
            stats = self._from_recovered(row).get(key)
            return None if stats is None else (stats.min, stats.max, stats.null_count)
        valid, mins, maxs, nulls = column
        return (mins[row], maxs[row], nulls[row]) if valid[row] else None

    def keys_of(self, row: int) -> list[str]:
        """The stats keys the file of `row` has (decodes every stats column)."""
        if self._recovered is None:
            out = []
            for key in self._columns:
                column = self._decoded.get(key) or self._decode(key)
                if column is None:
                    break
                if column[0][row]:
                    out.append(key)
            else:
                return out
        return list(self._from_recovered(row))

    def _decode(self, key: str) -> tuple[list[bool], list[Any], list[Any], list[int]] | None:
        with self._lock:
            if key in self._decoded:
                return self._decoded[key]
            if self._recovered is not None:
                return None
            name, encoding = self._columns[key]
            try:
                if self._source is None:
                    raise LakeError("the checkpoint's source is closed")
                array = pa.concat_arrays(self._source.read(columns=[name]).column(0).chunks)
                mins, maxs = array.field("min").to_pylist(), array.field("max").to_pylist()
                if encoding == "json":
                    mins, maxs = ([None if v is None else json.loads(v) for v in vs] for vs in (mins, maxs))
                elif _ARROW_TYPES[encoding] != array.type.field("min").type:
                    raise ValueError(f"stats column {name} is not of type {encoding}")
                column = (array.is_valid().to_pylist(), mins, maxs, array.field("nulls").to_pylist())
            except UNREADABLE as err:
                self._recovered = self._recover_stats(name, err)
                self._source = None
                return None
            self._decoded[key] = column
            self.loads += 1
            if len(self._decoded) == len(self._columns):
                self._source = None  # every column is decoded: free the checkpoint's bytes
            return column

    def _recover_stats(self, name: str, err: BaseException) -> StatsOf:
        if self._recover is None:
            raise LakeError(f"stats column {name} of a checkpoint is unreadable ({err}).") from err
        log.warning("stats column %s of a checkpoint is unreadable (%s); taking the stats from the log", name, err)
        return self._recover()

    def _from_recovered(self, row: int) -> Mapping[str, ColumnStats]:
        assert self._recovered is not None
        return self._recovered.get(self._paths[row], {})


class LazyStats(Mapping[str, ColumnStats]):
    """`DataFile.stats` of a file read from a checkpoint: one row of its `StatsColumns`."""

    __slots__ = ("_columns", "_row")

    def __init__(self, columns: StatsColumns, row: int) -> None:
        self._columns = columns
        self._row = row

    def __getitem__(self, key: str) -> ColumnStats:
        stats = self._columns.get(self._row, key)
        if stats is None:
            raise KeyError(key)
        return stats

    def get(self, key: str, default: Any = None) -> Any:  # the hot path of file skipping
        """The stats of column `key`, or `default`."""
        stats = self._columns.get(self._row, key)
        return default if stats is None else stats

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._columns.get(self._row, key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns.keys_of(self._row))

    def __len__(self) -> int:
        return len(self._columns.keys_of(self._row))

    def __repr__(self) -> str:
        return repr(dict(self))

    def __reduce__(self) -> tuple[Any, ...]:  # pickles and copies as a plain dict, without the checkpoint
        return dict, (dict(self),)

    def raw_items(self) -> Iterator[tuple[str, tuple[Any, Any, int]]]:
        """(key, (min, max, nulls)) for each stats key of the file, without building ColumnStats."""
        for key in self._columns.keys_of(self._row):
            triple = self._columns.raw(self._row, key)
            if triple is not None:
                yield key, triple
