"""`airflow-lake connect-server`: a Spark Connect server from the pip package, for lake tasks to share.

    airflow-lake connect-server [--port 15002] [--host 127.0.0.1] [--master local[2]] [--conf KEY=VALUE ...]

It runs `spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer` (pyspark's jars include
the server) in the foreground, with this Python for the server's Python workers, so they import the same
airflow_lake, pyarrow and pandas. Point a `spark_connect` connection at `sc://<host>:<port>`. Unless `--no-warm-up`,
a process of its own warms the server up once its port opens (`connect_warm_up`), so the first task does not pay
for the cold JVM.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from airflow_lake.jvm import curve_jar

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


def client_host(host: str) -> str:
    """The address a client on the server's host connects to (a server listening on every address: loopback)."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def start_warm_up(url: str, server_pid: int) -> None:
    """Start `connect_warm_up` for the server at `url` (process `server_pid`) in a process that is nobody's child
    (forked twice, in a session of its own): the server replaces this process and would never reap it."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked processes end in exec or _exit
        try:
            os.setsid()
            if os.fork() == 0:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                os.dup2(2, 1)  # its log lines go to the server's stderr; stdout stays the server's alone
                os.execv(sys.executable, [sys.executable, "-m", "airflow_lake.connect_warm_up", url,
                                          "--server-pid", str(server_pid)])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


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
    parser.add_argument("--warm-up", action=argparse.BooleanOptionalAction, default=True,
                        help="once the port opens, run a lake task's first steps once in the background, so the "
                        "first task does not pay for the cold JVM (default on)")


def run(args: argparse.Namespace) -> int:
    """Replace this process with the server (so its PID is the server's, for whoever stops it)."""
    ours = curve_jar()  # clustering's curve words in the JVM (else in Python workers)
    jars = ",".join(j for j in (args.jars, str(ours) if ours else "") if j)
    command = server_command(args.port, args.host, args.master, args.conf, jars)
    print(f"airflow-lake: Spark Connect server on sc://{args.host}:{args.port} (master {args.master})", flush=True)
    if getattr(args, "warm_up", False):  # (the server keeps this process's pid: execve)
        start_warm_up(f"sc://{client_host(args.host)}:{args.port}", os.getpid())
    os.execve(command[0], command, server_environment())
    return 0  # pragma: no cover - execve does not return
