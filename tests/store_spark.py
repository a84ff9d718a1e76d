"""Spark with a store's Hadoop connector, for the tests that write lake tables to a store server on 127.0.0.1:
the jars (`airflow-lake jars s3`: fetched once per machine with mvn into the user's cache; .ci/test fetches them
in the background), and the Spark settings that point S3A at the test's S3 server (`tests/s3_server.py`) with the
committer that writes without renames (`store_jars.NO_RENAME_CONF`, as the README tells users).

Without the jars a test is skipped, or fails under CI=true (a skip would hide a broken fetch); code outside pytest (the
benchmarks) takes `fetched`, which says why instead."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path

from airflow_lake import store_jars
from tests.engines.fetched import require
from tests.s3_server import REGION, S3Server


@functools.cache
def fetched(store: str) -> tuple[str | None, str]:
    """(the store's connector jars, comma-separated, "") once fetched (once per process); (None, why) if they
    cannot be."""
    try:
        jars_dir = store_jars.spark_jars_dir()
        hadoop, spark = store_jars.versions(jars_dir)
        paths = store_jars.fetch(store, hadoop=hadoop, cloud=store_jars.cloud_version(spark), spark_jars=jars_dir)
    except (store_jars.JarsError, OSError) as err:
        return None, str(err)
    return ",".join(str(p) for p in paths), ""


def jars(store: str = "s3") -> str:
    """The store's connector jars, comma-separated (for `--jars` / `spark.jars`); skip or fail without them."""
    found, why = fetched(store)
    require(None if found is None else Path(found), why, f"Spark on {store}")
    assert found is not None
    return found


def class_path_conf(store: str = "s3") -> dict[str, str]:
    """The store's jars on the class path of Spark's driver and executors (they lie on this machine), as the README
    tells users to install them: not `--jars` / `spark.jars`, which copies them into every application's
    `/tmp/spark-*/userFiles-*` (690 MB for S3) and ships them to each executor; a driver that is killed leaves its
    copy behind (the suite's SIGKILL tests filled a disk that way)."""
    path = jars(store).replace(",", os.pathsep)
    return {"spark.driver.extraClassPath": path, "spark.executor.extraClassPath": path}


def s3_spark_args(server: S3Server, conf: Mapping[str, str] | None = None) -> list[str]:
    """spark-submit (or `airflow-lake connect-server`) arguments for Spark on `server`: the S3 jars on the class
    path and `conf` (default `s3a_conf(server)`)."""
    return conf_args({**class_path_conf("s3"), **(s3a_conf(server) if conf is None else conf)})


def s3a_conf(server: S3Server) -> dict[str, str]:
    """Spark settings for S3A on `server` (path-style, plain HTTP, its fake credentials) and the no-rename
    committer: what a user sets for MinIO or Ceph (README, "Tables on object stores")."""
    return {
        "spark.hadoop.fs.s3a.endpoint": server.endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": REGION,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": "testing",
        "spark.hadoop.fs.s3a.secret.key": "testing",
        "spark.hadoop.fs.s3a.aws.credentials.provider":
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        **store_jars.spark_conf("s3"),
    }


def conf_args(conf: Mapping[str, str]) -> list[str]:
    """`conf` as spark-submit arguments."""
    return [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]


def available(store: str = "s3") -> bool:
    """Whether the store's connector jars are there (fetched once per machine), without skipping."""
    return fetched(store)[0] is not None
