"""`airflow-lake connect-server`: a Spark Connect server from the pip package, for lake tasks to share.

    airflow-lake connect-server [--port 15002] [--host 127.0.0.1] [--master local[2]] [--conf KEY=VALUE ...]

It runs `spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer` (pyspark's jars include
the server) in the foreground, with this Python for the server's Python workers, so they import the same
airflow_lake, pyarrow and pandas. Point a `spark_connect` connection at `sc://<host>:<port>`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002


def server_command(port: int, host: str, master: str, conf: Sequence[str] = (), jars: str = "") -> list[str]:
    """The spark-submit command line of a Spark Connect server (`jars`: comma-separated, for `--jars`)."""
    command = [spark_submit(), "--class", SERVER_CLASS, "--master", master, "--name", "airflow-lake connect server",
               "--conf", f"spark.connect.grpc.binding.port={port}",
               "--conf", f"spark.connect.grpc.binding.address={host}"]
    if jars:
        command += ["--jars", jars]
    for item in conf:
        command += ["--conf", item]
    return [*command, "spark-internal"]


def server_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: its Python workers run this interpreter."""
    env = dict(os.environ if environ is None else environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


def spark_submit() -> str:
    """spark-submit of the pyspark installed next to this Python, else the one on PATH."""
    local = Path(sys.executable).parent / "spark-submit"
    if local.exists():
        return str(local)
    found = shutil.which("spark-submit")
    if found is None:
        raise SystemExit("airflow-lake: spark-submit not found: pip install pyspark (it ships spark-submit).")
    return found


def _conf(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"gRPC port (default {DEFAULT_PORT})")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 in a container)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2]; e.g. spark://h:7077)")
    parser.add_argument("--conf", action="append", type=_conf, default=[], help="a Spark setting KEY=VALUE")
    parser.add_argument("--jars", default="", help="jars for the server, comma-separated (e.g. a store's connector: "
                        "--jars \"$(airflow-lake jars s3)\")")


def run(args: argparse.Namespace) -> int:
    """Replace this process with the server (so its PID is the server's, for whoever stops it)."""
    command = server_command(args.port, args.host, args.master, args.conf, args.jars)
    print(f"airflow-lake: Spark Connect server on sc://{args.host}:{args.port} (master {args.master})", flush=True)
    os.execve(command[0], command, server_environment())
    return 0  # pragma: no cover - execve does not return
