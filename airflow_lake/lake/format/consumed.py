"""Consumed positions: how far a downstream table has consumed the changes of each upstream table.

A commit that consumed upstream changes (an incremental job: `sources.incremental`) records, in its log entry's
metadata, the upstream snapshot it read up to:

    "consumed": {"<upstream identity>": {"seq": <end>, "table": "<upstream canonical url>", "view": "<name>"}}

The fold (`TableState.consumed`, upstream identity -> seq) takes each entry's positions over the earlier ones, so
the downstream's own log says what it has consumed: the output and the progress land in one atomic step (Delta's
`txn` action). A `restore` entry carries the restored snapshot's whole map (`{"<identity>": {"seq": n}}`) and
replaces the fold's: restoring the downstream to before a consumption makes its next run consume that again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONSUMED = "consumed"  # the log entry metadata key (and the checkpoint state's)


def positions_of(raw: Any) -> dict[str, int]:
    """The upstream identity -> seq map a log entry's `consumed` metadata (or a checkpoint's) holds; {} for none.
    A value is `{"seq": n, ...}` (as commits record it) or a bare seq."""
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, int] = {}
    for identity, value in raw.items():
        seq = value.get("seq") if isinstance(value, Mapping) else value
        if isinstance(seq, int | str) and not isinstance(seq, bool):
            out[str(identity)] = int(seq)
    return out


def fold_consumed(consumed: dict[str, int], metadata: Mapping[str, Any], *, restore: bool) -> None:
    """Fold one entry's metadata into `consumed`: a restore's map replaces it, any other entry's positions
    overwrite the ones of their upstreams."""
    if CONSUMED not in metadata:
        return
    positions = positions_of(metadata[CONSUMED])
    if restore:
        consumed.clear()
    consumed.update(positions)


def recorded(positions: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """A whole map as a restore entry records it (identities sorted, so entries compare and diff stably)."""
    return {identity: {"seq": int(seq)} for identity, seq in sorted(positions.items())}


__all__ = ["CONSUMED", "fold_consumed", "positions_of", "recorded"]
