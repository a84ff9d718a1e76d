"""Benchmark: what a lake task costs through spark-submit vs over Spark Connect, against a bare spark-submit.

1. Per task: a trivial lake operation (a 10-row write into a bucketed table by `LakeWriteOperator`, and a no-op:
   `ExecuteClusteringOperator` with no pending plan, which still starts Spark) as a one-task DAG in
   `airflow dags test` — real Airflow; the operator's `execute` and the task's duration in Airflow — once
   with a `spark` connection (local[2], one spark-submit per task) and once with a `spark_connect`
   connection to a warm Spark Connect server (local[2]); the baseline, measured in the same
   rounds, is a bare `spark-submit` of an empty PySpark job (a session started and stopped), timed whole.
   Goals: Connect <= 2 s per task; the spark-submit path <= 1.2x the bare spark-submit.
   The first task over Spark Connect (the server just started, its JVM cold) is reported on its own lines.
2. The example pipeline: `airflow dags test lake_ods_to_dm` (one day, 20,000 events) timed whole, both ways.
3. `--first-task-rounds N`: the first task on a server just started, N times each way on a fresh server: cold (as
   `airflow-lake connect-server --no-warm-up`), and warmed up as the command does by default (`connect_warm_up`,
   waited for here and timed on its own line), alternating which goes first; the second task on the same server
   beside it.

    .venv/bin/python benchmarks/bench_connect.py --rounds 5 --pipeline-rounds 2
    .venv/bin/python benchmarks/bench_connect.py --rounds 0 --pipeline-rounds 0 --first-task-rounds 3

The Spark Connect server is `airflow-lake connect-server`'s command (started here, stopped by its PID at the end).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, median, scratch_dir

sys.path.insert(0, str(REPO))
from airflow_lake.connect_server import server_command, server_environment

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
SPARK_SUBMIT = str(Path(sys.executable).with_name("spark-submit"))
EMPTY_JOB = "from pyspark.sql import SparkSession\nSparkSession.builder.getOrCreate().stop()\n"
# The same Spark work as the lake write (read the rows, 4 hash partitions on id sorted, write Parquet), without us.
PLAIN_JOB = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
rows = spark.read.parquet(sys.argv[1]).repartition(4, "id").sortWithinPartitions("id")
rows.write.mode("append").parquet(sys.argv[2])
spark.stop()
"""

# The one-task DAG `airflow dags test` runs (real Airflow: the task runner, XCom, asset events); the operator
# notes how long its `execute` took (the lake operation through the operator, without Airflow's own start-up).
TASK_DAG = """
import os, time
import pendulum
from airflow.sdk import DAG
from airflow_lake.operators.clustering import ExecuteClusteringOperator
from airflow_lake.operators.write import LakeWriteOperator

def timed(cls):
    class Timed(cls):
        def execute(self, context):
            started = time.perf_counter()
            out = super().execute(context)
            with open(os.environ["BENCH_TIMES"], "a") as times:
                times.write(f"{time.perf_counter() - started}\\n")
            return out
    return Timed

with DAG(dag_id="bench_write", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    timed(LakeWriteOperator)(task_id="task", table=os.environ["BENCH_TABLE"], source_path=os.environ["BENCH_SOURCE"],
                             conn_id=os.environ["BENCH_CONN_ID"])
with DAG(dag_id="bench_noop", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    timed(ExecuteClusteringOperator)(task_id="task", table=os.environ["BENCH_TABLE"],
                                     conn_id=os.environ["BENCH_CONN_ID"])
"""


FIRST_EXECUTE = "Spark Connect path: first task (server just started), write, operator execute"
FIRST_DURATION = "Spark Connect path: first task (server just started), write, Airflow task duration"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A Spark Connect server started with the product's own command; stopped by its PID. `warm_up`: then warmed
    up as `airflow-lake connect-server` does by default (`airflow_lake.connect_warm_up`), here waited for, so that
    `warm_up_seconds` says how long it took."""

    def __init__(self, work: Path, *, warm_up: bool = False) -> None:
        self.port = free_port()
        command = server_command(self.port, "127.0.0.1", "local[2]", ["spark.ui.enabled=false"])
        self.log = work / "connect-server.log"
        started = time.perf_counter()
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(command, env=server_environment(), stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 180
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("Spark Connect server did not start:\n" + self.log.read_text()[-3000:])
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            time.sleep(0.3)
        self.start_seconds = time.perf_counter() - started
        self.warm_up_seconds = 0.0
        if warm_up:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "airflow_lake.connect_warm_up", f"sc://127.0.0.1:{self.port}"],
                           env=server_environment(), capture_output=True, check=True, timeout=900)
            self.warm_up_seconds = time.perf_counter() - started

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)


def environment(home: Path, lake: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
    env.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "SPARK_LOCAL_IP": "127.0.0.1",
        "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]"}',
        "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT": json.dumps({"conn_type": "spark_connect", "host": "sc://127.0.0.1",
                                                          "port": port}),
        "AIRFLOW_LAKE_ROOT": str(lake / "tables"), "AIRFLOW_LAKE_LANDING": str(lake / "landing"),
        "AIRFLOW_LAKE_PIPELINE_SCHEDULE": "", "PYSPARK_PYTHON": sys.executable,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    })
    return env


def migrate(env: dict[str, str]) -> None:
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, check=True, timeout=600)


def task_seconds(env: dict[str, str], dag_id: str, conn_id: str, table: str, *, source: str,
                 day: int) -> tuple[float, float]:
    """Run a one-task DAG with `airflow dags test`: (the operator's execute, the task's duration in Airflow)."""
    times = Path(env["AIRFLOW_HOME"]) / "execute-times.txt"
    times.unlink(missing_ok=True)
    run_env = {**env, "BENCH_TABLE": table, "BENCH_SOURCE": source, "BENCH_CONN_ID": conn_id,
               "BENCH_TIMES": str(times)}
    logical = (dt.date(2024, 1, 1) + dt.timedelta(days=day)).isoformat()
    done = subprocess.run([AIRFLOW, "dags", "test", dag_id, logical], env=run_env, capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode != 0 or not times.exists():
        raise RuntimeError(f"task on {conn_id} failed:\n{(done.stdout + done.stderr)[-4000:]}")
    with sqlite3.connect(Path(env["AIRFLOW_HOME"]) / "airflow.db") as db:
        state, seconds = db.execute("SELECT state, duration FROM task_instance WHERE dag_id = ? "
                                    "ORDER BY end_date DESC LIMIT 1", (dag_id,)).fetchone()
    if state != "success":
        raise RuntimeError(f"task on {conn_id} ended {state}:\n{done.stdout[-4000:]}")
    return float(times.read_text().split()[-1]), float(seconds)


def bare_seconds(env: dict[str, str], job: Path, *args: str) -> float:
    """A spark-submit of `job`, timed whole."""
    started = time.perf_counter()
    subprocess.run([SPARK_SUBMIT, "--master", "local[2]", str(job), *args], env=env, capture_output=True,
                   check=True, timeout=600)
    return time.perf_counter() - started


def per_task(work: Path, port: int, rounds: int) -> dict[str, list[float]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    dags = work / "task-dags"
    dags.mkdir()
    (dags / "bench_task.py").write_text(TASK_DAG)
    env = {**environment(work / "airflow-tasks", work / "lake", port), "AIRFLOW__CORE__DAGS_FOLDER": str(dags)}
    migrate(env)
    source = work / "rows.parquet"
    pq.write_table(pa.table({"id": list(range(10)), "v": [float(i) for i in range(10)]}), source)
    job, plain = work / "empty_job.py", work / "plain_job.py"
    job.write_text(EMPTY_JOB)
    plain.write_text(PLAIN_JOB)
    from airflow_lake.lake import LakeTable

    tables = {}
    for way in ("spark_default", "spark_connect_default"):
        tables[way] = str(work / "lake" / f"t_{way}")
        LakeTable.create(tables[way], {"schema": "id BIGINT, v DOUBLE", "bucket": {"columns": ["id"], "count": 4}})
    # the first task over Spark Connect (the server's first session: it checks the workers' airflow_lake, and runs
    # on a cold JVM): reported on its own lines, not in the rounds' medians; then the OS caches for spark-submit
    first_execute, first_duration = task_seconds(env, "bench_write", "spark_connect_default",
                                                 tables["spark_connect_default"], source=str(source), day=0)
    bare_seconds(env, job)
    out: dict[str, list[float]] = {name: [] for name in (
        "bare spark-submit: empty job", "bare spark-submit: the same write in plain PySpark",
        "spark-submit path: write, operator execute", "spark-submit path: write, Airflow task duration",
        "Spark Connect path: write, operator execute", "Spark Connect path: write, Airflow task duration",
        "spark-submit path: no-op, operator execute", "Spark Connect path: no-op, operator execute")}
    out[FIRST_EXECUTE], out[FIRST_DURATION] = [first_execute], [first_duration]
    for r in range(rounds):
        out["bare spark-submit: empty job"].append(bare_seconds(env, job))
        out["bare spark-submit: the same write in plain PySpark"].append(
            bare_seconds(env, plain, str(source), str(work / "plain-out")))
        for way, conn_id, day in (("spark-submit path", "spark_default", 2 * r + 1),
                                  ("Spark Connect path", "spark_connect_default", 2 * r + 2)):
            execute, duration = task_seconds(env, "bench_write", conn_id, tables[conn_id], source=str(source), day=day)
            out[f"{way}: write, operator execute"].append(execute)
            out[f"{way}: write, Airflow task duration"].append(duration)
            execute, _ = task_seconds(env, "bench_noop", conn_id, tables[conn_id], source=str(source), day=day)
            out[f"{way}: no-op, operator execute"].append(execute)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in out.items()
                                            if k not in (FIRST_EXECUTE, FIRST_DURATION)), flush=True)
    return out


def first_tasks(work: Path, rounds: int) -> dict[str, list[float]]:
    """The first task over Spark Connect on a server just started, cold (as `--no-warm-up`) and warmed up (the
    default of `airflow-lake connect-server`), alternating which goes first: a fresh server per task."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_lake.lake import LakeTable

    dags = work / "first-dags"
    dags.mkdir()
    (dags / "bench_task.py").write_text(TASK_DAG)
    source = work / "first-rows.parquet"
    pq.write_table(pa.table({"id": list(range(10)), "v": [float(i) for i in range(10)]}), source)
    out: dict[str, list[float]] = {}
    for r in range(rounds):
        for warm in ((False, True) if r % 2 == 0 else (True, False)):
            way = "warmed up" if warm else "cold"
            base = work / f"first-{r}-{way.replace(' ', '-')}"
            base.mkdir(parents=True)
            server = Server(base, warm_up=warm)
            try:
                env = {**environment(base / "airflow", base / "lake", server.port),
                       "AIRFLOW__CORE__DAGS_FOLDER": str(dags)}
                migrate(env)
                table = str(base / "lake" / "t")
                LakeTable.create(table, {"schema": "id BIGINT, v DOUBLE", "bucket": {"columns": ["id"], "count": 4}})
                first = task_seconds(env, "bench_write", "spark_connect_default", table, source=str(source), day=0)
                second = task_seconds(env, "bench_write", "spark_connect_default", table, source=str(source), day=1)
            finally:
                server.stop()
            for name, value in ((f"{way}: server start (port open)", server.start_seconds),
                                (f"{way}: warm-up (after the port opened)", server.warm_up_seconds),
                                (f"{way}: first task, write, operator execute", first[0]),
                                (f"{way}: first task, write, Airflow task duration", first[1]),
                                (f"{way}: second task, write, operator execute", second[0])):
                out.setdefault(name, []).append(value)
            print(f"first-task round {r + 1}, {way}: " + ", ".join(f"{k.split(': ', 1)[1]} {v[-1]:.2f} s"
                                                                  for k, v in out.items() if k.startswith(way)),
                  flush=True)
    return out


def first_report(runs: dict[str, list[float]]) -> str:
    lines = ["| first task over Spark Connect, a fresh server each | median (s) | min - max (s) | warmed up ÷ cold |",
             "|---|---|---|---|"]
    for name, values in runs.items():
        way, what = name.split(": ", 1)
        cold = runs.get(f"cold: {what}")
        ratio = f"{median(values) / median(cold):.2f}" if way == "warmed up" and cold and median(cold) > 0 else ""
        lines.append(f"| {name} | {median(values):.2f} | {min(values):.2f} - {max(values):.2f} | {ratio} |")
    return "\n".join(lines)


def pipeline(work: Path, port: int, rounds: int, events: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"spark-submit path": [], "Spark Connect path": []}
    for r in range(rounds):
        for way, conn_id in (("spark-submit path", "spark_default"), ("Spark Connect path", "spark_connect_default")):
            base = work / f"pipeline-{r}-{conn_id}"
            env = {**environment(base / "airflow", base / "lake", port), "AIRFLOW_LAKE_SPARK_CONN_ID": conn_id}
            migrate(env)
            started = time.perf_counter()
            done = subprocess.run([AIRFLOW, "dags", "test", "lake_ods_to_dm", "2024-01-01", "-c",
                                   json.dumps({"events_per_day": events})], env=env, capture_output=True, text=True,
                                  timeout=1800, check=False)
            seconds = time.perf_counter() - started
            if done.returncode != 0 or "Marking task as FAILED" in done.stdout + done.stderr:
                raise RuntimeError(f"pipeline on {conn_id} failed:\n{(done.stdout + done.stderr)[-4000:]}")
            out[way].append(seconds)
            print(f"pipeline round {r + 1}: {way} {seconds:.1f} s", flush=True)
    return out


def report(tasks: dict[str, list[float]], runs: dict[str, list[float]], events: int) -> str:
    lines: list[str] = []
    if tasks:
        empty = median(tasks["bare spark-submit: empty job"])
        same = median(tasks["bare spark-submit: the same write in plain PySpark"])
        lines += ["| per task: a 10-row write into a 4-bucket table; a no-op (clustering, no plan) | median (s) "
                  "| min - max (s) | ÷ empty job | ÷ same write in plain PySpark |", "|---|---|---|---|---|"]
        for name, values in tasks.items():
            lines.append(f"| {name} | {median(values):.2f} | {min(values):.2f} - {max(values):.2f} | "
                         f"{median(values) / empty:.2f} | {median(values) / same:.2f} |")
    if runs:
        submit = median(runs["spark-submit path"])
        lines += ["", f"| example pipeline (`airflow dags test lake_ods_to_dm`, {events:,} events) | median (s) | "
                      "min - max (s) | ÷ spark-submit path |", "|---|---|---|---|"]
        for name, values in runs.items():
            lines.append(f"| {name} | {median(values):.1f} | {min(values):.1f} - {max(values):.1f} | "
                         f"{median(values) / submit:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pipeline-rounds", type=int, default=2, help="0 skips the pipeline")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--first-task-rounds", type=int, default=0,
                        help="also the first task on a fresh server, cold and warmed up, this many times each")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    print("load average at start:", Path("/proc/loadavg").read_text().strip(), flush=True)
    texts = []
    with scratch_dir("bench-connect-") as work:
        if args.rounds or args.pipeline_rounds:
            server = Server(work)
            try:
                tasks = per_task(work, server.port, args.rounds) if args.rounds else {}
                runs = pipeline(work, server.port, args.pipeline_rounds, args.events) if args.pipeline_rounds else {}
            finally:
                server.stop()
            texts.append(report(tasks, runs, args.events))
        if args.first_task_rounds:
            texts.append(first_report(first_tasks(work, args.first_task_rounds)))
    text = "\n\n".join(texts)
    print(text)
    print("load average at end:", Path("/proc/loadavg").read_text().strip())
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
