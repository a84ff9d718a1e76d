"""Publish a table for other engines: the Delta log (on unless `publish.delta` is 'false'); every commit calls it
once its entry has landed (`LakeTable.after_commit`), and `airflow-lake publish` / `PublishOperator` catch up.

A publish after a commit never fails the commit: the entry is in our log, so the commit succeeded. A publish that
fails is logged and caught up by the next commit or by `publish` run by hand (which raises what went wrong).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake import faults
from airflow_lake.lake.publish import delta_log, delta_publisher

if TYPE_CHECKING:
    from airflow_lake.lake.format.table_metadata import TableMetadata

log = logging.getLogger(__name__)
DELTA_PROPERTY = "publish.delta"


@dataclass(frozen=True)
class Published:
    """Where publishing stands: the newest entry of our log, and the newest one each format has."""

    seq: int  # the head of our log
    delta_seq: int | None  # the newest published Delta version (= our seq); None: Delta publishing is off
    delta_written: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Metrics form (XCom, `airflow-lake publish`)."""
        return {"seq": self.seq, "published_seq": self.delta_seq, "delta_versions_written": self.delta_written,
                "publish_seconds": round(self.seconds, 3)}


def delta_enabled(table: TableMetadata) -> bool:
    """Whether the table publishes a Delta log."""
    return table.spec.property(DELTA_PROPERTY) == "true"


def publish(table: TableMetadata, upto: int | None = None) -> Published:
    """Publish every entry not yet published, up to `upto` (default the head); raises what goes wrong."""
    head = table.commit_log.head() if upto is None else upto
    if not delta_enabled(table):
        return Published(head, None)
    delta = delta_publisher.publish(table, head)
    return Published(head, delta.version, delta.written, delta.seconds)


def after_commit(table: TableMetadata, seq: int) -> None:
    """Publish up to entry `seq`, which just landed; logs and swallows what goes wrong (the next one catches up)."""
    faults.reach("before_publish")  # the entry has landed, nothing of it is published
    try:
        publish(table, seq)
    except Exception:
        log.warning("log entry %d of %s is committed, but publishing it for other engines failed; the next commit "
                    "or `airflow-lake publish %s` catches up", seq, table.url, table.url, exc_info=True)


def log_needed_from(table: TableMetadata) -> int | None:
    """The oldest entry of our log that publishing still needs, which `clean` must not expire: the newest published
    Delta version (the publisher folds the state there and publishes every entry after it), or 0 for a table never
    published whose log is whole (`airflow-lake publish` publishes it from its creation); None: none (publishing
    is off, or the log was expired before the table was ever published)."""
    if not delta_enabled(table):
        return None
    done = delta_log.published_upto(table.storage, table.commit_log.head())
    if done >= 0:
        return done
    return 0 if table.commit_log.start() == 0 else None


def status(table: TableMetadata) -> Published:
    """Where publishing stands, without publishing."""
    head = table.commit_log.head()
    if not delta_enabled(table):
        return Published(head, None)
    return Published(head, delta_log.published_upto(table.storage, head))
