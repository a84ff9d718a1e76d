"""`incremental` in a query source is read strictly: each refusal names the field and the fix, before anything runs
or is committed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from airflow_lake.jobs import run
from airflow_lake.lake import LakeSpecError, LakeTable
from airflow_lake.lake.sources.incremental import IncrementalRef
from airflow_lake.lake.sources.load import Source


def source(*items: Any, **extra: Any) -> dict[str, Any]:
    return {"query": "SELECT * FROM ch", "incremental": list(items), **extra}


def test_a_valid_source() -> None:
    parsed = Source.from_dict(source({"view": "ch", "table": "/lake/up"}, {"view": "d", "table": "/lake/d", "from": 3},
                                     tables={"full": "/lake/up"}))
    assert parsed.incremental == (IncrementalRef("ch", "/lake/up"), IncrementalRef("d", "/lake/d", 3))
    assert parsed.describe()["incremental"] == {"ch": "/lake/up", "d": "/lake/d"}
    assert Source.from_dict(source({"view": "ch", "table": "/u", "from": "7"})).incremental[0].start == 7  # rendered


@pytest.mark.parametrize(("raw", "field", "problem"), [
    (source({"view": "ch", "table": "/u", "form": 3}), "source.incremental[0].form", "unknown field"),
    (source({"view": "ch"}), "source.incremental[0].table", "needs"),
    (source({"view": "1st", "table": "/u"}), "source.incremental[0].view", "not a valid view name"),
    (source({"view": "full", "table": "/u"}, tables={"FULL": "/u"}), "source.incremental[0].view",
     "taken by source.tables.FULL"),
    (source({"view": "ch", "table": "/u"}, {"view": "ch", "table": "/w"}), "source.incremental[1].view",
     "taken by source.incremental[0].view"),
    (source({"view": "ch", "table": "/u", "from": -2}), "source.incremental[0].from", "not a log sequence number"),
    (source({"view": "ch", "table": "/u", "from": True}), "source.incremental[0].from", "not a log sequence number"),
    (source(), "source.incremental", "not a non-empty list"),
    ({"query": "SELECT 1", "incremental": {"view": "ch", "table": "/u"}}, "source.incremental",
     "not a non-empty list"),
    ({"path": "/files", "incremental": [{"view": "ch", "table": "/u"}]}, "source.incremental", "for a `query` source"),
])
def test_bad_incremental_fields(raw: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(LakeSpecError, match=re.escape(problem)) as info:
        Source.from_dict(raw)
    assert info.value.field == field and "Fix:" in str(info.value)


def test_upstreams_refused_when_the_job_starts_nothing_committed(spark: Any, tmp_path: Path) -> None:
    up = LakeTable.create(str(tmp_path / "up"), {"schema": "id BIGINT"}).url
    down = LakeTable.create(str(tmp_path / "down"), {"schema": "id BIGINT"}).url

    def refused(*items: Any) -> LakeSpecError:
        spec = {"table": down, "source": source(*items), "request_id": "r"}
        with pytest.raises(LakeSpecError) as info:
            run(spark, "write", spec)
        return info.value

    own = refused({"view": "ch", "table": f"{tmp_path}/./down"})  # another spelling of the job's own table
    assert own.field == "source.incremental[0].table" and "cannot consume its own changes" in str(own)
    twice = refused({"view": "ch", "table": up}, {"view": "d", "table": f"{up}/"})
    assert twice.field == "source.incremental[1].table" and "upstream of view 'ch' too" in str(twice)
    ahead = refused({"view": "ch", "table": up, "from": 5})
    assert ahead.field == "source.incremental[0].from" and "its log ends at seq 0" in str(ahead)
    assert LakeTable.open(down).commit_log.head() == 0


def test_a_position_older_than_the_upstream_keeps_says_how_to_start_over_and_a_retry_still_answers(
        spark: Any, tmp_path: Path) -> None:
    from airflow_lake.lake import LakeChangesUnavailable
    from airflow_lake.lake.format.consumed import CONSUMED
    from tests.lake.publish.arrow_commits import commit, make_table

    up = make_table(str(tmp_path / "up"))
    first = commit(up, [1, 2])
    commit(up, [3], removed=[f.path for f in first.added])  # replaces the file seq 1 added
    up.clean(retain_hours=0, force=True)  # and deletes it: the changes after seq 1 cannot be read any more
    down = LakeTable.create(str(tmp_path / "down"), {"schema": "id BIGINT, v STRING, dt STRING"})
    txn = down.begin("commit", "write", {CONSUMED: {up.identity(): {"seq": first.seq}}}, request_id="r1")
    txn.commit()
    spec = {"table": down.url, "source": source({"view": "ch", "table": up.url}), "request_id": "r2"}
    with pytest.raises(LakeChangesUnavailable, match=r"this table consumed .* up to seq 1.*restore this table"):
        run(spark, "write", spec)
    assert down.commit_log.head() == 1
    # a retry of the request that committed that position reads no window: it returns its first result
    assert run(spark, "write", {**spec, "request_id": "r1"})["already_committed"] is True
