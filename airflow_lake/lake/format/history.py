"""How much history a table keeps: the one retention rule that `clean` (which expires log entries) and checkpoint
retention (after every checkpoint a writer makes) both follow.

* **The retention**: log entries are kept `log.retain.hours`, never less than `clean.retain.hours` (the data
  retention promises that snapshots current within it keep their files, for time travel and restore; expiring
  their log entries sooner would break that promise through the back door), and never less than what the clean
  at hand was asked to keep (`clean(retain_hours=H)`): `retention_hours`.
* **Where the log may start** (`newest_before`): the newest entry such that it and every entry before it completed
  before the retention's horizon. Completion times are the writers' clocks, which need not agree: a later entry
  may carry an earlier time. So no entry's time bounds another's and a binary search could skip a young entry;
  the entries are read in order up to the first one at or after the horizon (a running maximum). A snapshot is
  current from its entry until the next one lands, so it stays within the retention until every entry up to the
  next one is older than the horizon. A restore to a time uses the same rule (`inclusive`).
* **Which checkpoints are kept** (`kept_checkpoints`): the newest `checkpoint.retain.count`, and the oldest one at
  or after the log's start — the one every snapshot the log still holds folds from, whichever retention the clean
  that expired the log was given — and the one a clean is moving the start to (`mark_start`). Checkpoint
  retention compares no times: what `clean` expired decides what the checkpoints must carry.

`clean` marks the start it moves the log to (`_lake/_log_start.json`) *before* it writes the checkpoint there and
deletes entries, and checkpoint retention lists the checkpoints *before* it reads the mark: a checkpoint it lists
was written after its mark, so a writer's retention running in the middle of a clean never deletes the
checkpoint the clean is about to start the log from.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from airflow_lake.lake.format import paths
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.spec.table_spec import TableSpec

__all__ = ["kept_checkpoints", "mark_start", "marked_start", "newest_before", "retention_hours"]
log = logging.getLogger(__name__)


def retention_hours(spec: TableSpec, requested: float = 0.0) -> float:
    """How long log entries are kept: `log.retain.hours`, never less than `clean.retain.hours` nor `requested`
    (the data retention of the clean at hand). A shorter log retention is raised rather than refused: then
    raising `clean.retain.hours` would first need `log.retain.hours` raised, in another alter, for no gain."""
    return max(spec.float_property("log.retain.hours"), spec.float_property("clean.retain.hours"), requested)


def newest_before(completed_at: Callable[[int], float], first: int, head: int, when: float, *,
                  inclusive: bool = False) -> int | None:
    """The newest entry n in `first` .. `head` such that entries `first` .. n all completed before `when` (at or
    before it, `inclusive`); None if entry `first` did not.

    Reads the entries in order up to the first one past `when`: writers' clocks disagree, so times may go back
    from one entry to the next, and only a running maximum of them only grows.
    """
    found = None
    for seq in range(first, head + 1):
        at = completed_at(seq)
        if at > when or (at == when and not inclusive):
            break
        found = seq
    return found


def kept_checkpoints(seqs: Collection[int], keep: int, start: int, starting: int | None = None) -> set[int]:
    """Of the checkpoints at `seqs`, those retention keeps: the newest `keep` (at least one), the oldest at or after
    the log's `start` while entries are expired (`start` > 0; snapshots the log holds fold from it), and
    `starting` (the start a clean is moving the log to, `marked_start`)."""
    ordered = sorted(seqs, reverse=True)
    kept = set(ordered[:max(1, keep)])
    if start > 0:
        reachable = [s for s in ordered if s >= start]
        if reachable:
            kept.add(reachable[-1])
    if starting is not None and starting in ordered:
        kept.add(starting)
    return kept


def mark_start(storage: Storage, seq: int) -> None:
    """Record that a clean moves the log's start to entry `seq` (before it writes the checkpoint there)."""
    storage.write_json(paths.LOG_START, {"seq": seq})


def marked_start(storage: Storage) -> int | None:
    """The start the last clean moved (or is moving) the log to; None if none or the mark is damaged."""
    try:
        seq = storage.read_json(paths.LOG_START)["seq"]
    except FileNotFoundError:
        return None
    except (KeyError, ValueError, TypeError) as err:
        log.warning("ignoring the damaged mark %s/%s (%s)", storage.url, paths.LOG_START, err)
        return None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None
