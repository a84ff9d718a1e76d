"""A real Spark Connect server for tests: `airflow-lake connect-server` (pyspark's jars) on a free loopback
port, its Python workers running this interpreter; stopped by its PID."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.airflow_stack import free_port


class ConnectServer:
    """`start()` it, use `url`, `stop()` it (by PID)."""

    def __init__(self, log: Path, master: str = "local[2]", extra: Sequence[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.log = log
        self.master = master
        self.extra = list(extra)  # more arguments of `airflow-lake connect-server` (--jars, --conf)
        self.env = None if env is None else {**os.environ, **env}  # the server's environment (None: ours)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180) -> ConnectServer:
        # The server's JVM keeps the suite's JAVA_TOOL_OPTIONS (tests/jvm_archive.py: SHORT_JVM, C1 only and a serial
        # GC, and the class-data archive): on the tests' small jobs the optimising compiler costs more than it saves,
        # also over a run's minutes (measured: the Connect side of test_connect.py's parity test, server start
        # included, 58 CPU-s with the JVM's defaults, 32 with SHORT_JVM; four test files on one server, 391 CPU-s
        # and 313). No warm-up (`connect_warm_up`): the suite's first Connect test pays for the cold server, as it
        # always has, and nothing runs beside the tests that the server's stop would not end.
        command = [sys.executable, "-m", "airflow_lake.cli", "connect-server", "--port", str(self.port),
                   "--master", self.master, "--conf", "spark.ui.enabled=false",
                   "--conf", "spark.sql.shuffle.partitions=4", "--no-warm-up", *self.extra]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                         env=self.env)
        deadline = time.monotonic() + timeout
        while not self._listening():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not start:\n{self.tail()}")
            time.sleep(0.3)
        return self

    def _listening(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # Python workers the server left behind
