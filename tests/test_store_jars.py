"""`airflow-lake jars`: Spark's store connectors fetched once with mvn into the user's cache (real Maven; the S3 jars
are fetched once per machine, .ci/test prefetches them)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from airflow_lake import store_jars
from airflow_lake.cli import main
from tests.store_spark import jars


def test_the_s3_jars_are_the_connector_its_sdk_and_the_no_rename_committer(capsys: pytest.CaptureFixture[str]) -> None:
    listed = jars("s3").split(",")  # fetched (once per machine) through the same function the CLI runs
    names = {Path(p).name for p in listed}
    hadoop, spark = store_jars.versions(store_jars.spark_jars_dir())
    assert f"hadoop-aws-{hadoop}.jar" in names
    assert any(n.startswith("bundle-2.") for n in names)  # the AWS SDK v2 bundle hadoop-aws needs
    assert f"spark-hadoop-cloud_2.13-{store_jars.cloud_version(spark)}.jar" in names
    shipped = {store_jars._artifact_name(n) for n in os.listdir(store_jars.spark_jars_dir())}
    assert not {store_jars._artifact_name(n) for n in names} & shipped  # nothing Spark has already
    assert all(Path(p).is_file() and Path(p).is_absolute() for p in listed)

    assert main(["jars", "s3", "--json"]) == 0  # cached: no Maven run (mvn is not even looked up)
    out = json.loads(capsys.readouterr().out)
    assert out["spark_jars"].split(",") == listed and out["jars"] == listed
    assert out["spark_conf"]["spark.sql.sources.commitProtocolClass"].endswith("PathOutputCommitProtocol")
    assert out["spark_conf"]["spark.hadoop.fs.s3a.committer.name"] == "magic"
    assert main(["jars", "s3"]) == 0
    assert capsys.readouterr().out.strip() == ",".join(listed)
    assert main(["jars", "s3", "--class-path"]) == 0
    assert capsys.readouterr().out.strip() == ":".join(listed) == out["class_path"]


def test_a_cached_fetch_runs_no_maven(tmp_path: Path) -> None:
    jars("s3")
    hadoop, spark = store_jars.versions(store_jars.spark_jars_dir())
    missing = str(tmp_path / "no-mvn")  # a Maven that does not exist: only a cache hit can succeed
    again = store_jars.fetch("s3", hadoop=hadoop, cloud=store_jars.cloud_version(spark),
                             spark_jars=store_jars.spark_jars_dir(), mvn=missing)
    assert ",".join(map(str, again)) == jars("s3")


def test_versions_are_read_from_the_spark_jars(tmp_path: Path) -> None:
    (tmp_path / "hadoop-client-api-3.5.0.jar").touch()
    (tmp_path / "spark-core_2.13-4.2.0.jar").touch()
    assert store_jars.versions(tmp_path) == ("3.5.0", "4.2.0")
    assert store_jars.cloud_version("4.2.0") == "4.1.1"
    with pytest.raises(store_jars.JarsError, match=r"no spark-hadoop-cloud known for Spark 9\.1\.0.*--cloud-version"):
        store_jars.cloud_version("9.1.0")
    with pytest.raises(store_jars.JarsError, match=r"no hadoop-client-api jar.*--hadoop-version"):
        store_jars.versions(tmp_path / "..")


def test_errors_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    shared = tmp_path / "cache"
    (shared / "airflow-lake" / "jars").mkdir(parents=True)
    os.chmod(shared / "airflow-lake" / "jars", 0o777)  # a directory others may write to: never trusted
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    with pytest.raises(store_jars.JarsError, match=r"not this user's private directory.*XDG_CACHE_HOME"):
        store_jars.cache_root()
    os.chmod(shared / "airflow-lake" / "jars", stat.S_IRWXU)
    assert store_jars.cache_root() == shared / "airflow-lake" / "jars"

    empty = tmp_path / "spark"
    (empty / "jars").mkdir(parents=True)
    (empty / "jars" / "hadoop-client-api-3.5.0.jar").touch()
    (empty / "jars" / "spark-core_2.13-4.2.0.jar").touch()
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn on the PATH, and nothing cached for this Hadoop version
    assert main(["jars", "azure", "--spark-home", str(empty), "--hadoop-version", "3.5.99", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "Maven (mvn) is not installed" in error and "hadoop-azure:3.5.99" in error
    assert main(["jars", "s3", "--spark-home", str(tmp_path / "nowhere")]) == 2
    assert "is not a Spark installation" in capsys.readouterr().err
