"""A real S3-protocol server for the tests: moto's `ThreadedMotoServer` on 127.0.0.1, made atomic where S3 is,
and counted.

Why moto is patched: its PutObject handler (`moto/s3/responses.py`, `S3Response.put_object`) checks `If-None-Match`
with `backend.get_object` and stores the object later with `backend.put_object`, with no lock in between, while
its server answers every request on a thread of its own. Two racing conditional PUTs of one key can both pass the
check and both get 200 there — which S3 never allows. `ServerControls` holds a lock around that handler, so a
double win in a race test can only come from the code under test. `test_storage_s3.py` keeps the proof: with the
check-to-put window widened (`widen`), 16 raw botocore PUTs with `IfNoneMatch='*'` give exactly one 200 and fifteen
412s with the lock, and more than one 200 without it (`unlocked`).

The server also counts every request it answers (`RequestCounter`: per method and kind of path, e.g.
`("PUT", "log")`, `("LIST", "pending")`), for tests and benchmarks that count requests per open and per commit,
and it can answer a PUT with S3's `409 ConditionalRequestConflict` on request (`conflicts`), which S3 returns while
another conditional write of the key is in flight and moto never does. It also counts requests per signing access
key (`RequestCounter.signed`: a Spark driver's from its executors'), holds chosen requests on arrival until a test
has killed their client (`ServerControls.hold`, then `idle`), and lists multipart uploads with their real initiation
time (moto's own listing dates every upload 2010-11-10).

Fixtures: `s3_server` (session-wide; sets the AWS environment so that s3fs and botocore in this process and in the
processes it starts reach it) and `s3_root` (a fresh `s3://<bucket>/<prefix>` per test).
"""

from __future__ import annotations

import collections
import datetime
import html
import io
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

import pytest

BUCKET = "lake-tests"
REGION = "us-east-1"
CONFLICT_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ConditionalRequestConflict</Code><Message>A conflicting '
    "conditional operation is currently in progress against this resource. Try again.</Message><RequestId>"
    "tests</RequestId></Error>"
)

SLOW_DOWN_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.'
    "</Message><RequestId>tests</RequestId></Error>"
)

INTERNAL_ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code><Message>We encountered an internal '
    "error. Please try again.</Message><RequestId>tests</RequestId></Error>"
)


def kind_of(key: str) -> str:
    """What a key (or a listing prefix) of a table is: the `_lake/` folder it lies in (`log`, `pending`,
    `heartbeats`, `markers`, `checkpoints`, `staging`, `locks`, `last_checkpoint`), `delta_log` for the published
    Delta log's, `data` for other keys of a table, `bucket` for the bucket itself."""
    if not key:
        return "bucket"
    if "_delta_log/" in key or key.endswith("_delta_log"):
        return "delta_log"
    if "_lake/" not in key:
        return "data" if not key.endswith("_lake") else "meta"
    head = key.split("_lake/", 1)[1].split("/", 1)[0]
    return "last_checkpoint" if head == "_last_checkpoint.json" else (head or "meta")


def client_of(agent: str) -> str:
    """Who sent a request, by its User-Agent: `spark` (Hadoop's S3A connector: the AWS SDK for Java), `python`
    (botocore: s3fs, which the lake's metadata and footer reads go through, or boto3), `other`."""
    lowered = agent.lower()
    if "aws-sdk-java" in lowered or "hadoop" in lowered:
        return "spark"
    if "botocore" in lowered or "boto3" in lowered:
        return "python"
    return "other"


class RequestCounter:
    """Requests the server answered, per (method, kind); a LIST is a GET of the bucket with `list-type`, a
    BATCH_DELETE a POST of the bucket with `delete`, a COPY a PUT with `x-amz-copy-source` (CopyObject or
    UploadPartCopy: how Hadoop's S3A connector renames, so a count of 0 proves a write renamed nothing). Also
    counted per client (`client_of` its User-Agent): what Spark's connector asked for apart from what the lake's
    Python side did (`mark_clients`, `since_clients`; there a batch delete is of the kind of the keys it deletes,
    and a GET of the bucket's multipart uploads is a LIST_UPLOADS of its prefix's kind). Thread-safe: the server
    answers on many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._statuses: collections.Counter[tuple[str, str, int]] = collections.Counter()
        self._clients: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._signed: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self.recent: collections.deque[tuple[str, str, int]] = collections.deque(maxlen=20_000)

    def record(self, method: str, path: str, query: str, status: int, *, copy: bool = False,
               access_key: str = "", agent: str = "", deleted: str = "") -> None:
        """Count one answered request (`path` is the WSGI PATH_INFO: /bucket/key, path-style; `copy`: it carried
        `x-amz-copy-source`; `access_key`: the one that signed it, counted in `signed`; `agent`: its User-Agent;
        `deleted`: a batch delete's first key)."""
        bucket_and_key = unquote(path).lstrip("/")
        key = bucket_and_key.split("/", 1)[1] if "/" in bucket_and_key else ""
        params = parse_qs(query, keep_blank_values=True)
        label = method
        if not key and method == "GET" and "list-type" in params:
            label, key = "LIST", params.get("prefix", [""])[0]
        elif not key and method == "POST" and "delete" in params:
            label = "BATCH_DELETE"
        elif copy and method == "PUT":
            label = "COPY"
        kind = kind_of(key)
        # per client, the requests on the bucket itself are told apart by the keys they touch: a batch delete by
        # its first key, a listing of multipart uploads (S3A's committers abort stale ones) by its prefix
        client_label, client_kind = label, kind
        if label == "BATCH_DELETE" and deleted:
            client_kind = kind_of(deleted)
        elif not key and method == "GET" and "uploads" in params:
            client_label, client_kind = "LIST_UPLOADS", kind_of(params.get("prefix", [""])[0])
        with self._lock:
            self._counts[(label, kind)] += 1
            self._statuses[(label, kind, status)] += 1
            self._clients[(client_of(agent), client_label, client_kind)] += 1
            self._signed[(access_key, label, kind)] += 1
            self.recent.append((label, key, status))

    def mark(self) -> collections.Counter[tuple[str, str]]:
        """The counts so far (a copy), to subtract from later ones."""
        with self._lock:
            return collections.Counter(self._counts)

    def since(self, mark: collections.Counter[tuple[str, str]]) -> collections.Counter[tuple[str, str]]:
        """Requests answered since `mark`, per (method, kind)."""
        now = self.mark()
        now.subtract(mark)
        return collections.Counter({k: v for k, v in now.items() if v > 0})

    def mark_clients(self) -> collections.Counter[tuple[str, str, str]]:
        """The counts so far per (client, method, kind) (a copy), to subtract from later ones."""
        with self._lock:
            return collections.Counter(self._clients)

    def since_clients(self, mark: collections.Counter[tuple[str, str, str]]) -> collections.Counter[
            tuple[str, str, str]]:
        """Requests answered since `mark`, per (client, method, kind)."""
        now = self.mark_clients()
        now.subtract(mark)
        return collections.Counter({k: v for k, v in now.items() if v > 0})

    def signed(self) -> collections.Counter[tuple[str, str, str]]:
        """Counts per (access key that signed the request, method, kind) so far (a copy): tells processes that
        sign with different keys apart (a Spark driver and its executors)."""
        with self._lock:
            return collections.Counter(self._signed)

    def statuses(self) -> collections.Counter[tuple[str, str, int]]:
        """Counts per (method, kind, HTTP status) so far (a copy)."""
        with self._lock:
            return collections.Counter(self._statuses)


@dataclass
class Hold:
    """Requests stopped on arrival (`ServerControls.hold`): `reached` is set at the first, `requests` lists them
    (method, bucket-relative key)."""

    match: Callable[[str, str, dict[str, list[str]]], bool]
    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    requests: list[tuple[str, str]] = field(default_factory=list)

    def wait(self, proc: Any, timeout: float = 180) -> None:
        """Wait until a request was held; fail early if `proc` (a subprocess.Popen) ends first."""
        deadline = time.monotonic() + timeout
        while not self.reached.wait(0.05):
            if proc.poll() is not None:
                raise AssertionError(f"process ended with {proc.returncode} before a request was held")
            if time.monotonic() > deadline:
                raise AssertionError(f"no request was held within {timeout} s")


@dataclass
class ServerControls:
    """The server-side switches: the lock that makes a conditional PUT atomic, a widened window between moto's
    existence check and its store (to prove the lock), and injected 409 conflicts."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    atomic: bool = True
    ignores_conditions: bool = False  # act as an S3-compatible server without conditional writes
    slow_prefixes: dict[str, float] = field(default_factory=dict)  # key prefix -> seconds to sleep before storing
    pending_conflicts: dict[str, int] = field(default_factory=dict)  # key -> 409s still to answer
    conflicts_sent: int = 0
    lost_answers: dict[str, str] = field(default_factory=dict)  # key prefix -> "500" or "reset", for one PUT
    answers_lost: list[str] = field(default_factory=list)  # keys whose PUT landed and whose answer was lost
    dropping: threading.local = field(default_factory=threading.local)  # per request thread: drop its connection
    holds: list[Hold] = field(default_factory=list)  # requests to stop on arrival (`hold`)
    in_flight: int = 0  # requests being answered now (`idle`)
    _conflicts_lock: threading.Lock = field(default_factory=threading.Lock)
    _idle: threading.Condition = field(default_factory=threading.Condition)

    def unlocked(self) -> AbstractContextManager[None]:
        """Serve PUTs the way moto does by itself (check, then store, unlocked) — only to prove the lock."""
        return self._switched("atomic", False)

    def ignoring_conditions(self) -> AbstractContextManager[None]:
        """Serve PUTs as a server that ignores If-None-Match does (older S3-compatible servers)."""
        return self._switched("ignores_conditions", True)

    @contextmanager
    def _switched(self, flag: str, value: bool) -> Iterator[None]:
        """Set the switch `flag` to `value` for the block, then back to what it was."""
        before = getattr(self, flag)
        setattr(self, flag, value)
        try:
            yield
        finally:
            setattr(self, flag, before)

    @contextmanager
    def widen(self, key_prefix: str, seconds: float) -> Iterator[None]:
        """Sleep `seconds` between moto's If-None-Match check and its store for keys under `key_prefix`."""
        self.slow_prefixes[key_prefix] = seconds
        try:
            yield
        finally:
            self.slow_prefixes.pop(key_prefix, None)

    def conflicts(self, key: str, count: int) -> None:
        """Answer the next `count` PUTs of `key` (bucket-relative) with 409 ConditionalRequestConflict."""
        self.pending_conflicts[key] = count

    def take_conflict(self, key: str) -> bool:
        """True (and one fewer left) if the next PUT of `key` is to get a 409."""
        with self._conflicts_lock:
            left = self.pending_conflicts.get(key, 0)
            if left <= 0:
                return False
            self.pending_conflicts[key] = left - 1
            self.conflicts_sent += 1
            return True

    def lose_answer(self, key_prefix: str, how: str = "500") -> None:
        """Store the next PUT of a key under `key_prefix` (bucket-relative), then lose its answer: answer a
        500 InternalError (`how="500"`) or close the connection without an answer (`"reset"`) — what a client
        sees when S3 wrote the object and the response did not reach it. The client's own retry then meets the
        stored object (a conditional PUT: 412)."""
        if how not in ("500", "reset"):
            raise ValueError(f"how={how!r}: '500' or 'reset'")
        self.lost_answers[key_prefix] = how

    def take_lost_answer(self, key: str) -> str | None:
        """How the answer of this PUT of `key` is to be lost (and the switch is then used up), or None."""
        with self._conflicts_lock:
            prefix = next((p for p in self.lost_answers if key.startswith(p)), None)
            if prefix is None:
                return None
            self.answers_lost.append(key)
            return self.lost_answers.pop(prefix)

    @contextmanager
    def hold(self, match: Callable[[str, str, dict[str, list[str]]], bool]) -> Iterator[Hold]:
        """Stop every request `match(method, key, query)` accepts on arrival, unanswered and unprocessed, until the
        block ends; then each gets 503 SlowDown and nothing of it is stored. A test waits for `Hold.reached` to
        know a client is at that step (and kills it there); after the block, `idle` waits for the rest."""
        hold = Hold(match)
        self.holds.append(hold)
        try:
            yield hold
        finally:
            self.holds.remove(hold)
            hold.released.set()

    def held(self, method: str, key: str, query: dict[str, list[str]]) -> bool:
        """True if a hold took this request: it waited for the hold's end and must not reach moto."""
        hold = next((h for h in list(self.holds) if h.match(method, key, query)), None)
        if hold is None:
            return False
        hold.requests.append((method, key))
        hold.reached.set()
        hold.released.wait(timeout=600)
        return True

    def enter(self) -> None:
        with self._idle:
            self.in_flight += 1

    def leave(self) -> None:
        with self._idle:
            self.in_flight -= 1
            self._idle.notify_all()

    def idle(self, timeout: float = 60) -> None:
        """Wait until the server answers no request (those of a killed client included)."""
        with self._idle:
            if not self._idle.wait_for(lambda: self.in_flight == 0, timeout=timeout):
                raise AssertionError(f"{self.in_flight} request(s) still in flight after {timeout} s")

    def delay_for(self, key: str) -> float:
        return max((s for p, s in self.slow_prefixes.items() if key.startswith(p)), default=0.0)


@dataclass
class S3Server:
    """A running server: `url` (s3://<bucket>), `endpoint` (http://127.0.0.1:<port>), `bucket`, the request
    `counter` and the server-side `controls`."""

    endpoint: str
    bucket: str
    counter: RequestCounter
    controls: ServerControls
    client: Any  # a botocore S3 client of the server (for raw requests in tests)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}"

    def key_of(self, url: str) -> str:
        """The bucket-relative key of an s3:// URL of this bucket."""
        prefix = f"{self.url}/"
        if not url.startswith(prefix):
            raise ValueError(f"{url!r} is not in {self.url}")
        return url[len(prefix):]


def _patch_moto(controls: ServerControls) -> Callable[[], None]:
    """Make moto's PutObject handler atomic (check + store under one lock), let it widen its window or answer a
    409 on request, and list multipart uploads with the time each was initiated (moto's own listing gives every
    upload one fixed date in 2010); returns the function that undoes the patch."""
    from moto.core.responses import ActionResult
    from moto.s3.models import FakeMultipart, S3Backend
    from moto.s3.responses import S3Response
    from werkzeug.datastructures import Headers

    original_handler = S3Response.put_object
    original_store = S3Backend.put_object

    def put_object(self: Any) -> Any:
        key = self.parse_key_name()
        if controls.take_conflict(key):
            return 409, {"Content-Type": "application/xml"}, CONFLICT_BODY
        if controls.ignores_conditions:
            headers = Headers(self.headers)
            headers.remove("If-None-Match")
            self.headers = headers
        lost = controls.take_lost_answer(key)
        if controls.atomic:
            with controls.lock:
                answer = original_handler(self)
        else:
            answer = original_handler(self)
        if lost == "500":  # the object is stored; the client hears a failure and resends (botocore retries 500s)
            return 500, {"Content-Type": "application/xml"}, INTERNAL_ERROR_BODY
        if lost == "reset":  # the object is stored; the server closes the connection instead of answering
            controls.dropping.connection = True
        return answer

    def store(self: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
        delay = controls.delay_for(key_name)
        if delay:
            time.sleep(delay)  # moto checked If-None-Match already: a racing PUT slips in here unless locked
        return original_store(self, bucket_name, key_name, *args, **kwargs)

    def start_upload(self: Any, *args: Any, **kwargs: Any) -> None:
        original_upload_init(self, *args, **kwargs)
        self.initiated = datetime.datetime.now(datetime.UTC)

    def list_uploads(self: Any) -> Any:
        # moto answers every upload as initiated on 2010-11-10: S3 answers when it was, which age rules need
        prefix = self.querystring.get("prefix", [""])[0]
        uploads = [{"Key": u.key_name, "UploadId": u.id, "StorageClass": "STANDARD",
                    "Initiated": getattr(u, "initiated", datetime.datetime.now(datetime.UTC))}
                   for u in self.backend.list_multipart_uploads(self.bucket_name).values()
                   if u.key_name.startswith(prefix)]
        self.data["Action"] = "ListMultipartUploads"
        return self.serialized(ActionResult({"Bucket": self.bucket_name, "KeyMarker": "", "UploadIdMarker": "",
                                             "MaxUploads": 1000, "IsTruncated": False, "Uploads": uploads}))

    original_upload_init = FakeMultipart.__init__
    original_list_uploads = S3Response.list_multipart_uploads
    S3Response.put_object = put_object  # type: ignore[method-assign]
    S3Backend.put_object = store  # type: ignore[method-assign]
    FakeMultipart.__init__ = start_upload  # type: ignore[method-assign]
    S3Response.list_multipart_uploads = list_uploads  # type: ignore[method-assign]

    def undo() -> None:
        S3Response.put_object = original_handler  # type: ignore[method-assign]
        S3Backend.put_object = original_store  # type: ignore[method-assign]
        FakeMultipart.__init__ = original_upload_init  # type: ignore[method-assign]
        S3Response.list_multipart_uploads = original_list_uploads  # type: ignore[method-assign]

    return undo


def _first_deleted_key(environ: dict[str, Any]) -> str:
    """The first key a batch delete (POST /bucket?delete) names, "" for other requests; the body is read and put
    back for moto."""
    if environ.get("REQUEST_METHOD") != "POST" or "delete" not in parse_qs(environ.get("QUERY_STRING", ""),
                                                                           keep_blank_values=True):
        return ""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return ""
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    found = re.search(rb"<Key>(.*?)</Key>", body, re.DOTALL)
    return html.unescape(found.group(1).decode("utf-8", "replace")) if found else ""


def _access_key(authorization: str) -> str:
    """The access key of a SigV4 Authorization header (`... Credential=<key>/<date>/...`), or ''."""
    _, found, rest = authorization.partition("Credential=")
    return rest.split("/", 1)[0] if found else ""


def _start_server(counter: RequestCounter, controls: ServerControls) -> Any:
    """A ThreadedMotoServer on 127.0.0.1 and a free port whose WSGI app counts every request it answers."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class CountingMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:  # as moto's, with the app wrapped
            app = DomainDispatcherApplication(create_backend_app)

            def counted(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
                controls.enter()
                try:
                    return serve_one(environ, start_response)
                finally:
                    controls.leave()

            def serve_one(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
                deleted = _first_deleted_key(environ)

                def start(status: str, headers: Any, *rest: Any) -> Any:
                    counter.record(environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", ""),
                                   environ.get("QUERY_STRING", ""), int(status.split(" ", 1)[0]),
                                   copy="HTTP_X_AMZ_COPY_SOURCE" in environ,
                                   access_key=_access_key(environ.get("HTTP_AUTHORIZATION", "")),
                                   agent=environ.get("HTTP_USER_AGENT", ""), deleted=deleted)
                    return start_response(status, headers, *rest)
                if controls.holds:
                    bucket_and_key = unquote(environ.get("PATH_INFO", "")).lstrip("/")
                    key = bucket_and_key.split("/", 1)[1] if "/" in bucket_and_key else ""
                    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
                    if controls.held(environ.get("REQUEST_METHOD", ""), key, query):  # `ServerControls.hold`
                        start("503 Service Unavailable", [("Content-Type", "application/xml")])
                        return [SLOW_DOWN_BODY.encode()]
                answer: Iterable[bytes] = app(environ, start)
                if getattr(controls.dropping, "connection", False):  # `ServerControls.lose_answer(how="reset")`
                    controls.dropping.connection = False
                    environ["werkzeug.socket"].shutdown(socket.SHUT_RDWR)
                    return []
                return answer

            self._server = make_server(self._ip_address, self._port, counted, True,
                                       request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    server = CountingMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    return server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """An S3 server on 127.0.0.1 for the run, with one bucket; the AWS environment of this process (and so of
    the processes it starts) points s3fs and botocore at it with fake credentials."""
    import boto3

    quiet = logging.getLogger("werkzeug")  # one line per request otherwise
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    counter = RequestCounter()
    controls = ServerControls()
    undo = _patch_moto(controls)
    server = _start_server(counter, controls)
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        env.delenv("AWS_PROFILE", raising=False)
        env.setenv("AWS_DEFAULT_REGION", REGION)
        env.setenv("AWS_ENDPOINT_URL", endpoint)  # botocore (and so s3fs) reads it for every client it makes
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION)
        client.create_bucket(Bucket=BUCKET)
        try:
            yield S3Server(endpoint, BUCKET, counter, controls, client)
        finally:
            server.stop()
            undo()
            quiet.setLevel(level)


@pytest.fixture
def s3_root(s3_server: S3Server) -> str:
    """A fresh table URL on the server for one test: s3://<bucket>/<unique prefix>."""
    return f"{s3_server.url}/t{uuid.uuid4().hex[:16]}"


@contextmanager
def serve(bucket: str = BUCKET) -> Iterator[S3Server]:
    """The `s3_server` fixture outside pytest (for benchmarks): the same counted, atomic server on 127.0.0.1 with one
    bucket, and this process's AWS environment pointing at it (inherited by the processes it starts; restored
    after)."""
    import os

    import boto3

    quiet = logging.getLogger("werkzeug")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    counter = RequestCounter()
    controls = ServerControls()
    undo = _patch_moto(controls)
    server = _start_server(counter, controls)
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION",
             "AWS_ENDPOINT_URL", "AWS_EC2_METADATA_DISABLED")
    saved = {name: os.environ.get(name) for name in names}
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        os.environ.pop(name, None)
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": endpoint,
                       "AWS_EC2_METADATA_DISABLED": "true"})
    try:
        client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION)
        client.create_bucket(Bucket=bucket)
        yield S3Server(endpoint, bucket, counter, controls, client)
    finally:
        server.stop()
        undo()
        quiet.setLevel(level)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
