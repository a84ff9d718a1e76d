"""What other engines see of a table, against our log: the newest published Delta version next to our head, the
commits not published yet, and for a primary-key table the live files no other engine sees (`lake.publish`
publishes such a table as of its last compaction). `airflow-lake ls`, the Lake page and the operators' XCom metrics
show it. Metadata only (`publisher.status`: a few existence checks; a primary-key table's latest state), no Spark, no
Airflow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_lake.lake.format.data_files import DataFile
from airflow_lake.lake.format.table_state import UPSERT_ACTION
from airflow_lake.lake.publish import publisher
from airflow_lake.lake.publish.visibility import FileOperations, is_base, visible
from airflow_lake.lake.spec.table_spec import stored_spec

if TYPE_CHECKING:
    from airflow_lake.lake.format.snapshots import TableState
    from airflow_lake.lake.table import LakeTable

log = logging.getLogger(__name__)
# what a publish *run* did (`Published.to_dict`): meaningless in a status, and `seq` is the operation's own commit
# in its metrics; every other field of `Published` (another format's published seq) is passed on as it is
RUN_FIELDS = frozenset({"seq", "delta_versions_written", "publish_seconds"})


def published_data(table: LakeTable, state: TableState | None = None) -> dict[str, Any]:
    """Where publishing stands: `seq` (our head), `published_seq` (the newest published Delta version; -1 none yet,
    None: the table does not publish), `unpublished_commits` (head - published_seq), the other fields of
    `publisher.status` as they are, and for a primary-key table that publishes `hidden_files`, `hidden_commits`
    and `tombstone_files` (`hidden_data`). `state`: the table's latest state, if the caller has it."""
    status = publisher.status(table)
    fields = status.to_dict()
    published = fields.get("published_seq")
    out: dict[str, Any] = {"seq": status.seq, "published_seq": published,
                           "unpublished_commits": None if published is None else max(0, status.seq - published)}
    out.update({k: v for k, v in fields.items() if k not in RUN_FIELDS and k not in out})
    if published is not None:
        state = table.state() if state is None else state
        if stored_spec(state.spec).primary_key:
            out.update(hidden_data(table, state))
    return out


def hidden_data(table: LakeTable, state: TableState) -> dict[str, int]:
    """A primary-key table's live files other engines do not see (`visibility.visible`): `hidden_files`, of them
    `tombstone_files` (base files holding only delete tombstones: never published, by design) and the rest, the
    files of upserts and versioned deletes since the last compaction, which `compact_upserts` publishes:
    `hidden_commits` (the commits that wrote them) and `hidden_rows` (their rows)."""
    spec = stored_spec(state.spec)
    operation_of = _operations(table, state)
    hidden = [f for f in state.files.values() if not visible(f, spec, operation_of)]
    waiting = [f for f in hidden if not is_base(operation_of(f) or "")]
    return {"hidden_files": len(hidden), "hidden_commits": len({f.instant for f in waiting}),
            "hidden_rows": sum(f.rows for f in waiting), "tombstone_files": len(hidden) - len(waiting)}


def _operations(table: LakeTable, state: TableState) -> Callable[[DataFile], str | None]:
    """`visible`'s `operation_of`: a file of an upsert entry is known from the state's version index (no log
    read; most live files of a busy primary-key table are such deltas); other files' entries are read once each."""
    upserts = set((state.versions or {}).values())
    lookup = FileOperations(table, state)

    def operation_of(data_file: DataFile) -> str | None:
        if state.instants.get(data_file.instant) in upserts:
            return UPSERT_ACTION
        return lookup(data_file)

    return operation_of


def publication_metrics(table_url: str) -> dict[str, Any]:
    """The fields an operation's metrics (XCom) carry after it ran on `table_url`: `published_data` without `seq`
    (the metrics' own `seq` is the operation's commit). Never raises: the operation has succeeded; what cannot be
    read is logged and left out."""
    from airflow_lake.lake.table import LakeTable

    try:
        data = published_data(LakeTable.open(table_url))
    except Exception:
        log.warning("cannot tell how far %s is published for other engines", table_url, exc_info=True)
        return {}
    data.pop("seq", None)
    return data


def with_publication(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """`metrics` (an operation's result, naming its `table`) with `publication_metrics` of that table; the
    metrics' own fields win (a `publish` run's result says what it did)."""
    table = metrics.get("table")
    if not isinstance(table, str) or not table:
        return dict(metrics)
    return {**metrics, **{k: v for k, v in publication_metrics(table).items() if k not in metrics}}
