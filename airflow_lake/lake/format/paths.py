"""Where a table keeps its metadata, relative to the table root, and the one check every path taken from metadata
passes (`confined`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from airflow_lake.lake.errors import LakeUnsafePath

META = "_lake"
# data files written since issue 24: `data/<instant>-<write id>[-b<count>|-plain]/<partition dirs>/<Spark's name>`,
# one directory per write, never moved (older files lie at `<partition dirs>/part-<instant>-...` under the root)
DATA = "data"
LOG = f"{META}/log"  # completed actions, one JSON file per sequence number, created exclusively
PENDING = f"{META}/pending"  # requested / inflight instants not (yet) in the log
HEARTBEATS = f"{META}/heartbeats"  # touched by a live writer
# per instant, manifests (`<uuid>.manifest.json`) naming the table paths it is about to place data files at,
# written before it places any so a rollback finds them; older writers left one empty file per data file
MARKERS = f"{META}/markers"
CHECKPOINTS = f"{META}/checkpoints"  # the folded table state every N sequence numbers
LAST_CHECKPOINT = f"{META}/_last_checkpoint.json"  # {"seq": N, "format": "parquet", ...}: the newest checkpoint
# {"seq": N}: the entry the last clean moved (or is moving) the log's start to (`history.mark_start`)
LOG_START = f"{META}/_log_start.json"
CHECKPOINT_FORMATS = ("parquet", "json")  # Parquet since format 2; JSON checkpoints of older tables are still read


def log_file(seq: int) -> str:
    """Relative path of the log entry with sequence number `seq`."""
    return f"{LOG}/{seq:020d}.json"


def checkpoint_file(seq: int, fmt: str = "parquet") -> str:
    """Relative path of the checkpoint taken after `seq` in format `fmt` ("parquet", or "json" for old tables)."""
    return f"{CHECKPOINTS}/{seq:020d}.{fmt}"


def seq_of(name: str) -> int | None:
    """Sequence number of a log file name (`<seq:020d>.json`), or None for other names."""
    stem = name[:-5] if name.endswith(".json") else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def checkpoint_of(name: str) -> tuple[int, str] | None:
    """(sequence number, format) of a checkpoint file name, or None for other names (e.g. temporary files)."""
    stem, _, fmt = name.partition(".")
    return (int(stem), fmt) if fmt in CHECKPOINT_FORMATS and len(stem) == 20 and stem.isdigit() else None
LOCKS = f"{META}/locks"  # short-lived exclusive locks (e.g. scheduling clustering), stale after a timeout


# -- paths from metadata ---------------------------------------------------------------------------------------
# Two areas. TABLE: any normalized path under the table root (what `Storage` accepts for any file it is asked
# about; its own metadata under `_lake/` included). DATA: where data files lie, all a log entry, checkpoint,
# manifest, marker or plan may name — the table root outside `_lake/`: `data/<write>/...`, Hive partition
# directories `col=value/...` and files at the root (older tables), never a segment Spark takes for hidden (one
# starting with `.`, or with `_` and holding no `=`: `_lake`, `_SUCCESS`, `_temporary`, `.crc`), which no data file
# Spark reads can have. Both: relative (no leading `/`), no URL scheme or drive (`file:`, `s3://`, `C:`), no `.` or
# `..` segment, no empty segment (`a//b`, a trailing `/`), no backslash, no control character.
Area = Literal["table", "data"]
_CHAR = r"[^/\\\x00-\x1f\x7f]"  # anything but a separator, a backslash or a control character
_NO_SCHEME = r"(?![A-Za-z][A-Za-z0-9+.\-]*:)"
_TABLE_SEGMENT = rf"(?!\.\.?(?:/|$)){_CHAR}+"
_DATA_SEGMENT = rf"(?:[^/\\\x00-\x1f\x7f._]{_CHAR}*|_[^/\\\x00-\x1f\x7f=]*={_CHAR}*)"
# one fullmatch per path (linear, no backtracking): about 1-2 us, a tenth of building the `DataFile` it belongs to
_RULES = {"table": re.compile(rf"{_NO_SCHEME}{_TABLE_SEGMENT}(?:/{_TABLE_SEGMENT})*"),
          "data": re.compile(rf"{_NO_SCHEME}{_DATA_SEGMENT}(?:/{_DATA_SEGMENT})*")}
DATA_AREA = ("the table root outside `_lake/`: `data/<write>/...`, partition directories `col=value/...` or files at "
             "the root, with no segment Spark hides (`.x`, `_x` without `=`)")
UNSAFE_FIX = ("Restore that file from a backup (or remove it, for a manifest or marker of an instant that wrote "
              "nothing there), and find who wrote it: anyone who can write this table's `_lake/` directory reaches "
              "whatever the table's writers can delete.")


def confined(rels: Iterable[object], source: str, *, area: Area = "data", directories: bool = False) -> list[str]:
    """The paths `rels`, each checked to be a normalized relative path inside `area` of the table (see `Area`);
    the one check every path taken from metadata (log entries, checkpoints, manifests, markers, plans) passes
    before anything reads, lists or deletes it, and that `Storage` applies to every path it is given.

    Raises `LakeUnsafePath` naming `source` (the file or field the paths come from), the first bad path and what
    is wrong with it. Callers check every path of an entry or manifest before they act on any of them, so a
    damaged one deletes nothing. `directories`: a path may end in one `/` (a directory a manifest names)."""
    rule = _RULES[area].fullmatch
    out: list[str] = []
    for rel in rels:
        if not isinstance(rel, str) or rule(rel[:-1] if directories and rel.endswith("/") else rel) is None:
            raise LakeUnsafePath(source, rel, unsafe_problem(rel, area, directories), UNSAFE_FIX)
        out.append(rel)
    return out


def unsafe_problem(rel: object, area: Area = "data", directories: bool = False) -> str:
    """What is wrong with a path `confined` refuses (for its message)."""
    if not isinstance(rel, str):
        return f"is a {type(rel).__name__}, not a path"
    text = rel[:-1] if directories and rel.endswith("/") else rel
    segments = text.split("/")
    if not text:
        return "is empty (the table root itself)"
    if text.startswith("/"):
        return "is absolute"
    if re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", text):
        return "is a URL or a drive (it has a scheme), not a path relative to the table"
    if ".." in segments:
        return "climbs out with `..`"
    if "." in segments or "" in segments:
        return "is not normalized (an empty or `.` segment, or a trailing `/`)"
    if re.search(r"[\\\x00-\x1f\x7f]", text):
        return "holds a backslash or a control character"
    if segments[0].lower() == META:
        return "lies in the table's metadata directory `_lake/`, outside its data area"
    return f"lies outside the table's data area ({DATA_AREA})"


def parent_dirs(rel: str) -> list[str]:
    """The directories above a file, outermost first, each as `a/`, `a/b/` (as a store lists a directory marker)."""
    parts = rel.split("/")[:-1]
    return ["/".join(parts[:depth]) + "/" for depth in range(1, len(parts) + 1)]
