"""Where a table keeps its metadata, relative to the table root."""

from __future__ import annotations

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
