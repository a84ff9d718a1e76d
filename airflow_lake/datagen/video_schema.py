"""The example video tables' source schemas and merge rules: what the pipeline's DAG files need at parse time,
kept apart from the data generator (`video.py`, which needs numpy and pyarrow)."""

from __future__ import annotations

EVENTS_SCHEMA = ("event_id BIGINT NOT NULL, event_type STRING, work_id BIGINT, user_id BIGINT, play_ms BIGINT, "
                 "event_ts TIMESTAMP, dt STRING")
WORKS_SCHEMA = ("work_id BIGINT NOT NULL, author_id BIGINT, category STRING, title STRING, duration_s INT, "
                "edits BIGINT")
WORKS_MERGE = {"title": "last_non_null", "edits": "sum"}
WORKS_NULLS = {"title": ["null"]}
USERS_SCHEMA = "user_id BIGINT NOT NULL, region STRING, level INT, followers BIGINT"
USERS_MERGE = {"level": "max"}
