"""Object stores a lake table may live on, and how each one creates a file only if it is absent.

A commit is the creation of the next log entry, and it is safe only if that creation is atomic: of two writers
creating entry N at once, exactly one may succeed. Object stores have no rename or hard link, but the big three
have a conditional write that is exactly this "create if absent", and their fsspec implementations send it for
`pipe_file(path, data, mode="create")` (one request):

* Amazon S3 (`s3://`, and `s3a://` as Spark users write it): PutObject with `If-None-Match: *` (since 2024-08).
  412 PreconditionFailed: the key exists. 409 ConditionalRequestConflict: another conditional write of the key is
  in flight — retried here, after which the key exists (412) or the retry wins. s3fs >= 2024.12.0 (its
  `_pipe_file`), with a botocore whose PutObject knows `IfNoneMatch`: s3fs filters the arguments it sends through
  botocore's model and would silently drop an unknown one, so that is checked too.
* Google Cloud Storage (`gs://`, `gcs://`): an upload with `ifGenerationMatch=0`; gcsfs >= 2024.12.0 (PR #651).
* Azure Blob Storage / ADLS Gen2 (`abfs://`, `abfss://`, `az://`): an upload with `If-None-Match: *`
  (`overwrite=False`); adlfs >= 2024.12.0 (PR #491).

Any other fsspec store (`memory://`, `http://`, `ftp://`, ...) and older versions of these packages are refused:
fsspec's generic `mode="create"` checks existence and then writes, so two writers can both "create" entry N.
An S3-compatible server that ignores `If-None-Match` (older MinIO or Ceph releases) cannot be told from S3 by its
URL; `probe` (run when a table is created) catches it by creating one key twice.
"""

from __future__ import annotations

import contextlib
import inspect
import random
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from airflow_lake.lake.errors import LakeCommitConflict, LakeError, LakeSpecError

CONFLICT_ATTEMPTS = 6  # 409s in a row before giving up (S3 answers 409 only while another write is in flight)
CONFLICT_BACKOFF = 0.02  # seconds, doubled after each 409, with jitter: at most ~1 s in all


@dataclass(frozen=True)
class Store:
    """An object store with an atomic create-if-absent, and the fsspec package that sends it."""

    name: str
    schemes: tuple[str, ...]
    protocol: str  # the fsspec protocol the schemes map to
    package: str
    extra: str  # the airflow-lake extra that installs `package`
    minimum: tuple[int, ...]  # the first version of `package` whose `pipe_file(mode="create")` is conditional
    conditional_write: str

    @property
    def requirement(self) -> str:
        return f"{self.package}>={'.'.join(map(str, self.minimum))}"


STORES = (
    Store("Amazon S3", ("s3", "s3a"), "s3", "s3fs", "s3", (2024, 12, 0), "PutObject with If-None-Match: *"),
    Store("Google Cloud Storage", ("gs", "gcs"), "gs", "gcsfs", "gcs", (2024, 12, 0),
          "an upload with ifGenerationMatch=0"),
    Store("Azure Blob Storage", ("abfs", "abfss", "az"), "abfs", "adlfs", "azure", (2024, 12, 0),
          "an upload with If-None-Match: *"),
)
_BY_SCHEME = {scheme: store for store in STORES for scheme in store.schemes}
SUPPORTED = ", ".join(f"{s.name} ({', '.join(f'{x}://' for x in s.schemes)}; {s.requirement})" for s in STORES)
WHY = "no atomic create-if-absent: two writers could both commit log entry N, and one commit would be lost"


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case ('' for a plain path)."""
    return urlparse(url).scheme.lower()


# Hadoop's file system for each store's schemes, as Spark reaches it: S3A (hadoop-aws) for every S3 spelling, the
# GCS connector for gs://, ABFS (hadoop-azure) for abfss:// (an az:// or abfs:// URL is given to Spark as it is).
_HADOOP_SCHEMES = {"s3": "s3a", "s3a": "s3a", "gs": "gs", "gcs": "gs"}


def hadoop_url(url: str) -> str:
    """The URL as Spark's Hadoop file systems name it: `s3://b/k` -> `s3a://b/k`; other URLs as they are."""
    scheme = scheme_of(url)
    target = _HADOOP_SCHEMES.get(scheme)
    return target + url[len(scheme):] if target else url


def store_of(url: str) -> Store | None:
    """The known store a URL lies on, or None."""
    return _BY_SCHEME.get(scheme_of(url))


def open_fs(url: str) -> tuple[Any, str]:
    """The fsspec file system of a store URL and the table root's path in it. Listing caches are off for the
    known stores: a listing served from a cache could hide another writer's entry, and nothing may decide from a
    stale listing."""
    import fsspec  # only object stores need it

    store = store_of(url)
    options: dict[str, Any] = {}
    target = url
    if store is not None:
        options["use_listings_cache"] = False
        scheme = scheme_of(url)
        # s3a:// -> s3://, abfss:// -> abfs://, gcs:// -> gs://: one implementation (S3:// too: schemes ignore case)
        target = store.protocol + url[len(scheme):]
    try:
        fs, root = fsspec.core.url_to_fs(target, **options)
    except ImportError as err:
        fix = (f"Install {store.package}: pip install 'airflow-lake[{store.extra}]' ({store.requirement})."
               if store is not None else "Use a local or mounted path, or a store listed in the docs.")
        raise LakeSpecError("table", f"cannot open {url!r}: {err}", fix) from err
    except ValueError as err:  # an unknown protocol
        raise LakeSpecError("table", f"cannot open {url!r}: {err}",
                            f"Use a local or mounted path, or one of these stores: {SUPPORTED}.") from err
    return fs, str(root).rstrip("/")


def read_options(url: str, fs: Any) -> dict[str, Any]:
    """Options of `cat_file` for a store: on S3 one GET (s3fs >= 2026.3 otherwise asks the size first, to read
    big files in parallel ranges: one more request per read of a small metadata file)."""
    if not is_s3(url, fs):
        return {}
    try:
        accepted = inspect.signature(fs._cat_file).parameters
    except (AttributeError, TypeError, ValueError):
        return {}
    return {"max_concurrency": 1} if "max_concurrency" in accepted else {}


def is_s3(url: str, fs: Any) -> bool:
    """True if `fs` is s3fs serving an S3 URL (then `s3_list` may be used)."""
    store = store_of(url)
    return store is not None and store.protocol == "s3" and callable(getattr(fs, "call_s3", None))


def s3_list(fs: Any, path: str, *, delimiter: str = "/", start_after: str = "", max_keys: int | None = None
            ) -> tuple[list[str], list[str], bool]:
    """One ListObjectsV2 walk of the keys starting with `path` ('bucket/key-prefix', taken literally), paged;
    with `max_keys` only the first page of that size. Returns (keys, common prefixes, truncated), relative to
    `path`. Through s3fs's client (its credentials, endpoint and retries) but not its listing, which asks
    more than once when a prefix is empty (a HEAD and a second LIST), and no cache."""
    bucket, _, prefix = path.partition("/")
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if delimiter:
        request["Delimiter"] = delimiter
    if start_after:
        request["StartAfter"] = prefix + start_after
    if max_keys is not None:
        request["MaxKeys"] = max_keys
    keys: list[str] = []
    prefixes: list[str] = []
    while True:
        page = fs.call_s3("list_objects_v2", **request)
        keys.extend(item["Key"][len(prefix):] for item in page.get("Contents", ()))
        prefixes.extend(item["Prefix"][len(prefix):] for item in page.get("CommonPrefixes", ()))
        truncated = bool(page.get("IsTruncated"))
        if not truncated or max_keys is not None:
            return keys, prefixes, truncated
        request["ContinuationToken"] = page["NextContinuationToken"]


def s3_delete_keys(fs: Any, paths: list[str]) -> None:
    """Delete keys ('bucket/key', taken literally: a directory marker's trailing '/' included) with batch
    DeleteObjects requests of up to 1,000 keys; a missing key is no error (S3 answers success)."""
    by_bucket: dict[str, list[str]] = {}
    for path in paths:
        bucket, _, key = path.partition("/")
        by_bucket.setdefault(bucket, []).append(key)
    for bucket, keys in by_bucket.items():
        for start in range(0, len(keys), 1000):
            chunk = keys[start:start + 1000]
            answer = fs.call_s3("delete_objects", Bucket=bucket,
                                Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True})
            if errors := answer.get("Errors"):
                raise OSError(f"deleting {len(errors)} key(s) of s3://{bucket} failed: {errors[:3]}")


def s3_modified(fs: Any, path: str) -> float:
    """LastModified of one key ('bucket/key', taken literally: a directory marker's trailing '/' included), as a
    UNIX time; FileNotFoundError if it is gone."""
    bucket, _, key = path.partition("/")
    try:
        head = fs.call_s3("head_object", Bucket=bucket, Key=key)
    except OSError as err:
        if not isinstance(err, FileNotFoundError) and _status(err) == 404:
            raise FileNotFoundError(path) from err
        raise
    return float(head["LastModified"].timestamp())


def s3_uploads(fs: Any, path: str) -> list[tuple[str, str, float]]:
    """The multipart uploads in progress (started, neither completed nor aborted) whose keys start with `path`
    ('bucket/key-prefix'): (key relative to `path`, upload id, initiated as a UNIX time), paged."""
    bucket, _, prefix = path.partition("/")
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    found: list[tuple[str, str, float]] = []
    while True:
        page = fs.call_s3("list_multipart_uploads", **request)
        found.extend((item["Key"][len(prefix):], item["UploadId"], float(item["Initiated"].timestamp()))
                     for item in page.get("Uploads", ()) if item["Key"].startswith(prefix))
        if not page.get("IsTruncated"):
            return found
        request["KeyMarker"] = page["NextKeyMarker"]
        request["UploadIdMarker"] = page["NextUploadIdMarker"]


def s3_abort_upload(fs: Any, path: str, upload_id: str) -> None:
    """Abort one multipart upload of the key `path` ('bucket/key'): S3 frees its parts; one already gone (completed
    or aborted meanwhile) is no error."""
    bucket, _, key = path.partition("/")
    try:
        fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id)
    except FileNotFoundError:
        pass
    except OSError as err:
        if _status(err) != 404:  # NoSuchUpload
            raise


def installed_version(package: str) -> str | None:
    """The installed version of a distribution, or None."""
    # (imported here: ~10 ms with the zipfile, email and csv modules it pulls in, which every process that opened
    # a table paid, `airflow-lake ls` too, though only a store's checks call this)
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def version_tuple(text: str) -> tuple[int, ...]:
    """The leading numbers of a version ('2024.12.0' -> (2024, 12, 0); '2025.3.0rc1' -> (2025, 3, 0))."""
    out: list[int] = []
    for part in text.split("."):
        match = re.match(r"\d+", part)
        if match is None:
            break
        out.append(int(match.group()))
        if match.end() != len(part):
            break
    return tuple(out)


def refusal(url: str, version: str | None, if_none_match_known: bool = True) -> tuple[str, str] | None:
    """Why commits on `url` cannot be made safe and the fix (a problem naming the store and the reason), or None
    if they can. `version`: the installed version of the store's fsspec package; `if_none_match_known`: whether
    botocore's PutObject knows `IfNoneMatch` (S3 only)."""
    store = store_of(url)
    scheme = scheme_of(url)
    if store is None:
        return (f"{url!r} is not a local or mounted path, and its store ({scheme}://) has {WHY}.",
                f"Keep the table on a local or mounted path, or on a store with a conditional write: {SUPPORTED}.")
    if version is None or version_tuple(version) < store.minimum:
        found = f"{store.package} {version}" if version else f"no {store.package}"
        return (f"{url!r}: {store.name} through {found} has {WHY} ({store.package} sends {store.conditional_write} "
                f"from {'.'.join(map(str, store.minimum))} on).",
                f"pip install '{store.requirement}' (the extra airflow-lake[{store.extra}]).")
    if not if_none_match_known:
        return (f"{url!r}: the installed botocore does not know PutObject's IfNoneMatch, and s3fs drops arguments "
                f"botocore does not know, so S3 has {WHY}.",
                "pip install -U botocore aiobotocore (botocore 1.35.21 or later).")
    return None


def check(url: str, fs: Any) -> None:
    """Raise a `LakeSpecError` (a `LakeError`) if commits on this store cannot be made safe (`refusal`)."""
    store = store_of(url)
    version = installed_version(store.package) if store is not None else None
    known = _s3_knows_if_none_match(fs) if store is not None and store.protocol == "s3" else True
    reason = refusal(url, version, known)
    if reason is not None:
        raise LakeSpecError("table", *reason)


def _s3_knows_if_none_match(fs: Any) -> bool:
    """Whether the botocore model s3fs filters its arguments through has PutObject's IfNoneMatch."""
    try:
        members = fs.s3.meta.service_model.operation_model("PutObject").input_shape.members
    except Exception:  # not the s3fs we know: ask botocore itself
        import botocore.session

        members = botocore.session.get_session().get_service_model("s3").operation_model("PutObject") \
            .input_shape.members
    return "IfNoneMatch" in members


def create(fs: Any, path: str, data: bytes) -> bool:
    """Create `path` with `data` only if it does not exist, in one conditional write. True: created; False: another
    writer's create came first. A 409 (another conditional write of the key in flight) is retried with a short
    backoff.

    A PUT that landed may still look failed: its answer was lost (a 500, a reset connection), the client (botocore,
    s3fs) sent it again, and the store answered the resend 412 — or the client gave up with an error. So after a
    412 (or FileExistsError) and after any other error the key is read back: our own bytes mean our create landed
    (True). "Any other error" is any exception of the store's client, not only an OSError: s3fs translates its
    errors into OSErrors, but gcsfs raises its HttpError (a 5xx after its retries) and adlfs lets the Azure SDK's
    errors through (ServiceResponseError: the connection dropped before the answer). This is exact only if no two
    writers ever create one key with the same bytes: every caller's payload names its writer (a log entry its
    instant, a requested instant a random nonce, a lock its holder). Bytes of another writer: False; after another
    error with no key (or an unreadable one): that error, as it came."""
    delay = CONFLICT_BACKOFF
    for attempt in range(CONFLICT_ATTEMPTS):
        if attempt:
            time.sleep(delay * (1 + random.random()))
            delay *= 2
        try:
            fs.pipe_file(path, data, mode="create")
            return True
        except FileExistsError:
            return _holds(fs, path, data)
        except Exception as err:  # not only OSError: gcsfs's HttpError and the Azure SDK's errors are not
            status = _status(err)
            if status == 412:
                return _holds(fs, path, data)
            if status != 409:
                if _holds(fs, path, data, missing_ok=True):
                    return True
                raise
    raise LakeCommitConflict(f"the store kept answering 409 ConditionalRequestConflict to the creation of {path!r} "
                             f"({CONFLICT_ATTEMPTS} attempts): other writers keep writing that key. Run the job "
                             "again.")


def _holds(fs: Any, path: str, data: bytes, *, missing_ok: bool = False) -> bool:
    """Whether `path` holds exactly `data` (our own create, whose answer was lost). With `missing_ok` (after an
    error that says nothing of the key) a missing or unreadable key is False; else only a missing one is (a 412
    whose key is gone again: deleted since, e.g. a probe key)."""
    try:
        found = fs.cat_file(path)
    except FileNotFoundError:
        return False
    except OSError:
        if missing_ok:
            return False
        raise
    return bytes(found) == data


def _status(err: BaseException) -> int | None:
    """The HTTP status behind an implementation's error (its cause is the store client's error), if known."""
    seen: BaseException | None = err
    for _ in range(5):
        if seen is None:
            return None
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            if code in ("PreconditionFailed", "412"):
                return 412
            if code in ("ConditionalRequestConflict", "409"):
                return 409
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return int(status) if isinstance(status, int) else None
        for name in ("status", "status_code", "code"):  # aiohttp / the Azure SDK / gcsfs's HttpError
            status = getattr(seen, name, None)
            if isinstance(status, int) and 100 <= status <= 599:
                return status
        seen = seen.__cause__ or seen.__context__
    return None


def probe(fs: Any, root: str, url: str) -> None:
    """Check that the server honours the conditional write by creating one key twice (then deleting it): an
    S3-compatible server that ignores If-None-Match would let the second create succeed. Raises a LakeError."""
    key = f"{root}/_lake_probe_{uuid.uuid4().hex}"
    try:
        if not create(fs, key, b"1"):
            raise LakeError(f"{url!r}: probing the store's conditional write failed: a fresh key {key!r} already "
                            "existed. Fix: check the store.")
        if create(fs, key, b"2"):
            raise LakeError(f"{url!r}: the server ignores the conditional write ({WHY}): a second create of one "
                            "key succeeded. Fix: use a store that honours If-None-Match on PutObject (AWS S3; MinIO "
                            "and Ceph releases from 2024 on), or a local or mounted path.")
    finally:
        with contextlib.suppress(OSError):  # a leftover probe key is harmless: nothing of the table reads it
            fs.rm_file(key)
