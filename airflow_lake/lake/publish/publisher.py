"""Publish a table for other engines: the Delta log (on unless `publish.delta` is 'false') and, when the table
properties `publish.iceberg.catalog` and `publish.iceberg.table` name one, an Iceberg table in a pyiceberg catalog
(`iceberg_publisher.py`; pyiceberg is the optional extra `iceberg`); every commit calls it once its entry has
landed (`LakeTable.after_commit`), and `airflow-lake publish` / `PublishOperator` catch up.

A publish after a commit never fails the commit: the entry is in our log, so the commit succeeded. A publish that
fails is logged and caught up by the next commit or by `publish` run by hand (which raises what went wrong).
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lake.lake import faults
from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.publish import delta_log, delta_publisher
from airflow_lake.lake.spec.table_spec import ICEBERG_CATALOG_PROPERTY, ICEBERG_TABLE_PROPERTY

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
    iceberg_seq: int | None = None  # the newest entry in the Iceberg table (-1: none); None: Iceberg is off
    iceberg_written: int = 0

    @property
    def published_seq(self) -> int | None:
        """The newest entry every format publishes (None: publishing is off)."""
        known = [s for s in (self.delta_seq, self.iceberg_seq) if s is not None]
        return min(known) if known else None

    def to_dict(self) -> dict[str, Any]:
        """Metrics form (XCom, `airflow-lake publish`)."""
        out = {"seq": self.seq, "published_seq": self.published_seq, "delta_versions_written": self.delta_written,
               "publish_seconds": round(self.seconds, 3)}
        if self.iceberg_seq is not None:
            out |= {"iceberg_published_seq": self.iceberg_seq, "iceberg_snapshots_written": self.iceberg_written}
        return out


def delta_enabled(table: TableMetadata) -> bool:
    """Whether the table publishes a Delta log."""
    return table.spec.property(DELTA_PROPERTY) == "true"


def iceberg_enabled(table: TableMetadata) -> bool:
    """Whether the table publishes to an Iceberg catalog."""
    properties = table.spec.properties
    return bool(properties.get(ICEBERG_CATALOG_PROPERTY) and properties.get(ICEBERG_TABLE_PROPERTY))


def _iceberg() -> Any:
    """The Iceberg publisher; a clear error when pyiceberg (the `iceberg` extra) is not installed."""
    if importlib.util.find_spec("pyiceberg") is None:
        raise LakeError("the table publishes to an Iceberg catalog (publish.iceberg.catalog), but pyiceberg is not "
                        "installed. Fix: pip install 'airflow-lake[iceberg]' (or unset publish.iceberg.catalog and "
                        "publish.iceberg.table).")
    from airflow_lake.lake.publish import iceberg_publisher

    return iceberg_publisher


def publish(table: TableMetadata, upto: int | None = None) -> Published:
    """Publish every entry not yet published, up to `upto` (default the head); raises what goes wrong (after
    publishing what it can: the Delta log first, then Iceberg)."""
    head = table.commit_log.head() if upto is None else upto
    published = Published(head, None)
    failure: Exception | None = None
    if delta_enabled(table):
        try:
            delta = delta_publisher.publish(table, head)
            published = Published(head, delta.version, delta.written, delta.seconds)
        except Exception as err:  # Iceberg is still published; the error is raised below
            failure = err
    if iceberg_enabled(table):
        iceberg = _iceberg().publish(table, head)
        published = Published(head, published.delta_seq, published.delta_written,
                              published.seconds + iceberg.seconds, iceberg.seq, iceberg.written)
    if failure is not None:
        raise failure
    return published


def after_commit(table: TableMetadata, seq: int) -> None:
    """Publish up to entry `seq`, which just landed; logs and swallows what goes wrong (the next one catches up)."""
    faults.reach("before_publish")  # the entry has landed, nothing of it is published
    try:
        publish(table, seq)
    except Exception as err:
        log.warning("log entry %d of %s is committed, but publishing it for other engines failed (%s); the next "
                    "commit or `airflow-lake publish %s` catches up", seq, table.url, err, table.url, exc_info=True)


def status(table: TableMetadata) -> Published:
    """Where publishing stands, without publishing."""
    head = table.commit_log.head()
    delta = delta_log.published_upto(table.storage, head) if delta_enabled(table) else None
    iceberg = None
    if iceberg_enabled(table):
        try:
            iceberg = _iceberg().status(table, table.spec)
        except Exception:  # a status is shown, not acted on: an unreachable catalog shows -1
            log.warning("where %s stands in its Iceberg catalog is unknown", table.url, exc_info=True)
            iceberg = -1
    return Published(head, delta, iceberg_seq=iceberg)
