"""Per-file stats as Arrow columns: how a checkpoint stores them, and the lazy view its files get.

A checkpoint stores the i-th stats key in a column `stats_<i>`: a struct `{min, max, nulls}` per file,
null where the file has no stats for that key. min/max are typed by an *encoding*: `int` (int64),
`float` (float64), `bool`, `string` when every value of the key has that Python type, else `json`
(each value as JSON text), so a checkpoint gives back exactly the values that went in.

Reading a checkpoint never decodes these columns. Each of its files gets a `LazyStats` mapping, a view on
one row of a `StatsColumns` that the whole checkpoint shares and that decodes a key's column for all files
on its first use. Writing the next checkpoint copies columns that are still Arrow data as they are, so
stats only become Python objects where something asks for them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format.data_files import ColumnStats, DataFile

log = logging.getLogger(__name__)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
VALUE_TYPES: dict[str, pa.DataType] = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(),
                                       "string": pa.string(), "json": pa.string()}
# What damaged stats raise while being decoded (`pa.ArrowInvalid` is a ValueError, a failed page checksum
# an OSError).
UNREADABLE = (OSError, ValueError, KeyError, TypeError, IndexError, pa.ArrowException, LakeError)

Triple = tuple[Any, Any, int]  # (min, max, null count)
StatsOf = Mapping[str, Mapping[str, ColumnStats]]  # path -> stats


def struct_type(encoding: str) -> pa.StructType:
    """The Arrow type of a stats column with this encoding."""
    value = VALUE_TYPES[encoding]
    return pa.struct([("min", value), ("max", value), ("nulls", pa.int64())])


def column_name(index: int) -> str:
    """Name of the column of the `index`-th stats key."""
    return f"stats_{index}"


# -- writing ---------------------------------------------------------------------------------------


def stats_arrays(files: Sequence[DataFile], extra_rows: int = 0) -> list[tuple[str, str, pa.StructArray]]:
    """(key, encoding, column) per stats key of `files`, one row per file, then `extra_rows` null rows.

    Stats that a checkpoint holds as Arrow data (`LazyStats`) are copied column-wise; the others (from log
    entries) are converted from Python.
    """
    # (imported here, for writing: pyarrow.compute would cost a reader, e.g. `airflow-lake ls` or the Lake page
    # opening a checkpoint, about two thirds as much again as importing the Parquet reader itself)
    import pyarrow.compute as pc

    sources: dict[int, tuple[StatsColumns, list[int], list[int]]] = {}  # id -> (columns, their rows, positions)
    plain: list[int] = []
    for position, data_file in enumerate(files):
        stats = data_file.stats
        if isinstance(stats, LazyStats) and stats.columns.decode_all():
            group = sources.get(id(stats.columns))
            if group is None:
                group = sources[id(stats.columns)] = (stats.columns, [], [])
            group[1].append(stats.row)
            group[2].append(position)
        else:
            plain.append(position)
    plain_triples = _triples_by_key([files[p] for p in plain])
    keys = dict.fromkeys([k for columns, _, _ in sources.values() for k in columns.keys])
    keys.update(dict.fromkeys(plain_triples))
    order = [p for _, _, positions in sources.values() for p in positions] + plain
    back = None if order == list(range(len(order))) else pc.sort_indices(pa.array(order, pa.int64()))
    out = []
    for key in keys:
        pieces: list[tuple[str, Any]] = []  # (encoding | "absent" | "python", array | row count | triples)
        for columns, rows, _ in sources.values():
            found = columns.arrow(key)
            pieces.append(("absent", len(rows)) if found is None
                          else (found[0], found[1].take(pa.array(rows, pa.int64()))))
        if plain:
            pieces.append(("python", plain_triples.get(key) or [None] * len(plain)))
        encoding, array = _join(pieces)
        if back is not None:
            array = array.take(back)
        if extra_rows:
            array = pa.concat_arrays([array, pa.nulls(extra_rows, array.type)])
        out.append((key, encoding, array))
    return out


def _triples_by_key(files: Sequence[DataFile]) -> dict[str, list[Triple | None]]:
    out: dict[str, list[Triple | None]] = {}
    for row, data_file in enumerate(files):
        for key, stats in data_file.stats.items():
            column = out.get(key)
            if column is None:
                column = out[key] = [None] * len(files)
            column[row] = (stats.min, stats.max, stats.null_count)
    return out


def _join(pieces: list[tuple[str, Any]]) -> tuple[str, pa.StructArray]:
    """One column from pieces of rows: Arrow pieces are kept as they are if every piece agrees on a type."""
    wanted = {kind for kind, _ in pieces if kind not in ("absent", "python")}
    wanted.update(e for kind, triples in pieces if kind == "python" and (e := encoding_of(triples)))
    if len(wanted) <= 1:
        encoding = wanted.pop() if wanted else "string"
        arrays = []
        for kind, piece in pieces:
            if kind == "absent":
                arrays.append(pa.nulls(piece, struct_type(encoding)))
            elif kind == "python":
                arrays.append(_from_triples(piece, encoding))
            else:
                arrays.append(piece)
        try:
            return encoding, pa.concat_arrays(arrays) if len(arrays) > 1 else arrays[0]
        except (pa.ArrowException, UnicodeError):
            pass  # e.g. a string that is not valid Unicode: store the values as JSON
    triples: list[Triple | None] = []
    for kind, piece in pieces:
        if kind == "absent":
            triples.extend([None] * piece)
        elif kind == "python":
            triples.extend(piece)
        else:
            triples.extend(_to_triples(kind, piece))
    encoding = encoding_of(triples) or "string"
    try:
        return encoding, _from_triples(triples, encoding)
    except (pa.ArrowException, UnicodeError):
        return "json", _from_triples(triples, "json")


def encoding_of(triples: Sequence[Triple | None]) -> str:
    """How min/max of these triples are stored; "" if they hold no value (any encoding fits)."""
    values = [v for t in triples if t is not None for v in (t[0], t[1]) if v is not None]
    kinds = {type(v) for v in values}
    if not kinds:
        return ""
    if len(kinds) > 1:
        return "json"
    kind = kinds.pop()
    if kind is int:
        return "int" if min(values) >= INT64_MIN and max(values) <= INT64_MAX else "json"
    return {str: "string", bool: "bool", float: "float"}.get(kind, "json")


def _from_triples(triples: Sequence[Triple | None], encoding: str) -> pa.StructArray:
    mins = [None if t is None else t[0] for t in triples]
    maxs = [None if t is None else t[1] for t in triples]
    if encoding == "json":
        mins, maxs = ([None if v is None else json.dumps(v, default=str) for v in vs] for vs in (mins, maxs))
    value = VALUE_TYPES[encoding]
    return pa.StructArray.from_arrays(
        [pa.array(mins, value), pa.array(maxs, value),
         pa.array([None if t is None else int(t[2]) for t in triples], pa.int64())],
        fields=list(struct_type(encoding)), mask=pa.array([t is None for t in triples], pa.bool_()))


def _to_triples(encoding: str, array: pa.StructArray) -> list[Triple | None]:
    valid, mins, maxs, nulls = _lists(encoding, array)
    return [(mins[i], maxs[i], nulls[i]) if valid[i] else None for i in range(len(valid))]


def _lists(encoding: str, array: pa.StructArray) -> tuple[list[bool], list[Any], list[Any], list[int]]:
    mins, maxs = array.field("min").to_pylist(), array.field("max").to_pylist()
    if encoding == "json":
        mins, maxs = ([None if v is None else json.loads(v) for v in vs] for vs in (mins, maxs))
    return array.is_valid().to_pylist(), mins, maxs, array.field("nulls").to_pylist()


# -- reading ---------------------------------------------------------------------------------------


class StatsColumns:
    """The stats columns of one checkpoint, shared by its files; each is decoded for all files on first use.

    Should a column turn out to be unreadable (a damaged file), `recover` is called once and gives the stats
    of every file from elsewhere (the log), so readers still get the right stats.
    """

    def __init__(self, source: pq.ParquetFile, keys: Sequence[tuple[str, str]], paths: Sequence[str],
                 recover: Callable[[], StatsOf] | None) -> None:
        self._source: pq.ParquetFile | None = source
        self._columns = {key: (column_name(i), encoding) for i, (key, encoding) in enumerate(keys)}
        self._arrow: dict[str, pa.StructArray] = {}
        self._lists: dict[str, tuple[list[bool], list[Any], list[Any], list[int]]] = {}
        self._paths = paths
        self._recover = recover
        self._recovered: StatsOf | None = None
        self._lock = threading.Lock()
        self.loads = 0  # stats columns decoded from the checkpoint so far

    @property
    def keys(self) -> list[str]:
        """Every stats key of the checkpoint."""
        return list(self._columns)

    def arrow(self, key: str) -> tuple[str, pa.StructArray] | None:
        """(encoding, column) of `key`; None if the checkpoint has no such key or its stats are unreadable."""
        if key not in self._columns or not self._decode(key):
            return None
        return self._columns[key][1], self._arrow[key]

    def decode_all(self) -> bool:
        """Decode every column; False if the checkpoint's stats are unreadable (they then come from `recover`)."""
        return all(self._decode(key) for key in self._columns)

    def get(self, row: int, key: str) -> ColumnStats | None:
        """The stats of `key` in the file of `row`, None if it has none."""
        triple = self.raw(row, key)
        return None if triple is None else ColumnStats(*triple)

    def raw(self, row: int, key: str) -> Triple | None:
        """(min, max, nulls) of `key` in the file of `row`, None if it has none."""
        lists = self._lists.get(key)
        if lists is None:
            if key not in self._columns:
                return None
            if not self._decode(key):
                stats = self._from_recovered(row).get(key)
                return None if stats is None else (stats.min, stats.max, stats.null_count)
            lists = self._python_lists(key)
        valid, mins, maxs, nulls = lists
        return (mins[row], maxs[row], nulls[row]) if valid[row] else None

    def keys_of(self, row: int) -> list[str]:
        """The stats keys the file of `row` has."""
        if not self.decode_all():
            return list(self._from_recovered(row))
        return [key for key in self._columns if self._python_lists(key)[0][row]]

    def _decode(self, key: str) -> bool:
        """Make the Arrow column of `key` available; False if the stats are unreadable."""
        if key in self._arrow:
            return True
        with self._lock:
            if key in self._arrow:
                return True
            if self._recovered is not None:
                return False
            name, encoding = self._columns[key]
            try:
                if self._source is None:
                    raise LakeError("the checkpoint was released")
                array = pa.concat_arrays(self._source.read(columns=[name]).column(0).chunks)
                if array.type != struct_type(encoding):
                    raise ValueError(f"{name} is of type {array.type}, not {encoding} stats")
            except UNREADABLE as err:
                self._recovered = self._recover_stats(name, err)
                self._source = None
                return False
            self._arrow[key] = array
            self.loads += 1
            if len(self._arrow) == len(self._columns):
                self._source = None  # every column is decoded: the checkpoint's bytes can go
            return True

    def _python_lists(self, key: str) -> tuple[list[bool], list[Any], list[Any], list[int]]:
        lists = self._lists.get(key)
        if lists is None:
            lists = self._lists[key] = _lists(self._columns[key][1], self._arrow[key])
        return lists

    def _recover_stats(self, name: str, err: BaseException) -> StatsOf:
        if self._recover is None:
            raise LakeError(f"stats column {name} of a checkpoint is unreadable ({err}).") from err
        log.warning("stats column %s of a checkpoint is unreadable (%s); taking the stats from the log", name, err)
        return self._recover()

    def _from_recovered(self, row: int) -> Mapping[str, ColumnStats]:
        assert self._recovered is not None
        return self._recovered.get(self._paths[row], {})


class LazyStats(Mapping[str, ColumnStats]):
    """`DataFile.stats` of a file read from a checkpoint: one row of the checkpoint's `StatsColumns`."""

    __slots__ = ("columns", "row")

    def __init__(self, columns: StatsColumns, row: int) -> None:
        self.columns = columns
        self.row = row

    def __getitem__(self, key: str) -> ColumnStats:
        stats = self.columns.get(self.row, key)
        if stats is None:
            raise KeyError(key)
        return stats

    def get(self, key: str, default: Any = None) -> Any:  # the hot path of file skipping
        """The stats of column `key`, or `default`."""
        stats = self.columns.get(self.row, key)
        return default if stats is None else stats

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.columns.raw(self.row, key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns.keys_of(self.row))

    def __len__(self) -> int:
        return len(self.columns.keys_of(self.row))

    def __repr__(self) -> str:
        return repr(dict(self))

    def __reduce__(self) -> tuple[Any, ...]:  # pickles and copies as a plain dict, without the checkpoint
        return dict, (dict(self),)
