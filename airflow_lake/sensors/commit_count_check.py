"""The one check the sensor and its trigger share: count a table's commits (timeline only, no Spark)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_lake.lake.clustering.timeline import commits_since
from airflow_lake.lake.format.log import ACTIONS

# Polling a timeline faster than this only loads the store (poke_interval=0 read it thousands of times a second).
MIN_POKE_INTERVAL = 1.0


def check_actions(actions: str | Sequence[str] | None) -> list[str] | None:
    """The actions to count: None (commit and upsert), one action name, or a non-empty list of known ones."""
    if actions is None:
        return None
    listed = [actions] if isinstance(actions, str) else actions
    known = ", ".join(sorted(ACTIONS))
    if not isinstance(listed, Sequence) or not listed:
        raise ValueError(f"actions must name at least one of {known} (or be left out for commit and upsert), "
                         f"got {actions!r}")
    for action in listed:
        if action not in ACTIONS:
            raise ValueError(f"actions: {action!r} is not an action of the timeline; use {known} "
                             "(or leave actions out for commit and upsert)")
    return list(listed)


def count_commits(table: str, since: str, actions: Sequence[str] | None) -> dict[str, Any]:
    """`commits_since` of the table at `table`, as a JSON-friendly dict (count, instants, since_instant...)."""
    from airflow_lake.lake.table import LakeTable  # pyarrow and the core: at poke time, not at DAG parse

    lake = LakeTable.open(table)
    return {"table": lake.url, **commits_since(lake, since, actions).to_dict()}
