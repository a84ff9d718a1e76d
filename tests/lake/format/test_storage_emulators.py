"""The premise of every commit test on the GCS and Azure emulators (`tests/stores.py`), proven with the emulators'
own APIs, not through our code: a create-if-absent of one key raced by 16 writers gives exactly one success. Then
the metadata storage layer on each through gcsfs / adlfs: the exclusive create (412 on GCS and 409 on Azure both
mean "it exists"), listings, and every URL spelling of the store."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.format import stores
from airflow_lake.lake.format.storage import Storage
from airflow_lake.lake.table import LakeTable
from tests.stores import BUCKET, StoreServer, gcs_create

WRITERS = 16
ROUNDS = 3


def race(create: Callable[[int], int]) -> list[int]:
    """16 threads released together by a barrier, each creating the same key once; their HTTP statuses, sorted."""
    barrier = threading.Barrier(WRITERS)

    def one(i: int) -> int:
        barrier.wait(timeout=60)
        return create(i)

    with ThreadPoolExecutor(WRITERS) as pool:
        return sorted(pool.map(one, range(WRITERS)))


def test_fake_gcs_server_gives_exactly_one_win_to_racing_conditional_creates(gcs_server: StoreServer) -> None:
    """The upload gcsfs sends for a small file (multipart, `ifGenerationMatch=0`): one 200, fifteen 412s, every
    round. The simple media upload ignores the condition on this server (a second create of an existing key
    answers 200): gcsfs never sends it for a create, and a store that ignored the condition on the upload gcsfs
    does send would be caught by the probe at table creation (`stores.probe`)."""
    endpoint = gcs_server.endpoint
    for round_ in range(ROUNDS):
        key = f"proof/r{round_}"
        assert race(lambda i, key=key: gcs_create(endpoint, BUCKET, key, f"{i}".encode())) == [200] + [412] * 15
    assert gcs_create(endpoint, BUCKET, "proof/media", b"1", upload="media") == 200
    assert gcs_create(endpoint, BUCKET, "proof/media", b"2", upload="media") == 200  # not honoured here


def test_azurite_gives_exactly_one_win_to_racing_conditional_creates(azure_server: StoreServer) -> None:
    """Put Blob with `If-None-Match: *` (azure-storage-blob's `overwrite=False`): one 201, fifteen 409
    BlobAlreadyExists, every round."""
    from azure.core.exceptions import HttpResponseError

    container = azure_server.client

    def create(key: str, i: int) -> int:
        try:
            container.upload_blob(key, f"{i}".encode(), overwrite=False)
            return 201
        except HttpResponseError as err:
            return int(err.status_code or 0)

    for round_ in range(ROUNDS):
        key = f"proof/r{round_}"
        assert race(lambda i, key=key: create(key, i)) == [201] + [409] * 15
        assert container.download_blob(key).readall() in {f"{i}".encode() for i in range(WRITERS)}


@pytest.mark.parametrize("store", ["gcs", "azure"], indirect=True)
def test_the_exclusive_create_through_the_stores_package(store: StoreServer, store_root: str) -> None:
    """Through gcsfs / adlfs: the store's "exists" answer (GCS 412, Azure 409 BlobAlreadyExists: both arrive as
    FileExistsError) is a lost race, never a retry; our own bytes read back are a win (a create whose answer was
    lost); 16 racing creates through our code give one win."""
    table = Storage(store_root)
    table.check_commits(probe=True)  # gcsfs / adlfs new enough, and the server honours the condition
    assert table.walk_files("") == []  # the probe key is gone
    assert table.create_json("_lake/log/a.json", {"who": "one"})
    assert not table.create_json("_lake/log/a.json", {"who": "other"})
    assert table.read_json("_lake/log/a.json") == {"who": "one"}
    wins = race(lambda i: int(Storage(store_root).create_json("_lake/log/b.json", {"who": i})))
    assert wins == [0] * 15 + [1]


@pytest.mark.parametrize("store", ["gcs", "azure"], indirect=True)
def test_files_and_listings_on_the_emulators(store: StoreServer, store_root: str) -> None:
    table = Storage(store_root)
    assert not table.local and table.url == store_root
    table.write_json("_lake/pending/a.json", {"v": 1})
    table.write_bytes("_lake/markers/i/m.json", b"[]")
    table.write_bytes("dt=1/a.parquet", b"PAR1")
    assert table.read_json("_lake/pending/a.json") == {"v": 1} and table.read_bytes("dt=1/a.parquet") == b"PAR1"
    assert table.exists("_lake/pending/a.json") and table.exists("_lake/markers")  # a file; a "directory"
    assert not table.exists("_lake/pending/b.json") and not table.exists("_lake/log")
    assert table.is_file("_lake/pending/a.json") and not table.is_file("_lake/markers")
    assert table.size("dt=1/a.parquet") == 4
    assert table.list_dir("_lake") == ["markers", "pending"] and table.list_dir("_lake/log") == []
    assert table.list_dir("") == ["_lake", "dt=1"]
    assert table.list_after("_lake", "markers") == ["pending"]
    assert table.walk_files("_lake") == ["_lake/markers/i/m.json", "_lake/pending/a.json"]
    assert table.walk_files("nothing") == []
    sibling = Storage(store_root + "x")  # shares the prefix's leading characters: never listed or deleted with it
    sibling.write_json("_lake/pending/z.json", {})
    assert table.walk_files("") == ["_lake/markers/i/m.json", "_lake/pending/a.json", "dt=1/a.parquet"]
    assert table.delete("_lake/pending/a.json") and not table.exists("_lake/pending/a.json")
    table.delete_tree("_lake")
    assert table.walk_files("") == ["dt=1/a.parquet"] and sibling.exists("_lake/pending/z.json")
    table.delete_tree("_lake")  # gone already: no error
    with pytest.raises(FileNotFoundError):
        table.read_bytes("_lake/pending/a.json")


def test_every_spelling_of_an_azure_url_reaches_one_table(azure_server: StoreServer) -> None:
    """az://, abfs:// (adlfs's own) and abfss:// name one container; Spark is handed the URL as given."""
    key = azure_server.root().removeprefix(azure_server.url + "/")
    spellings = [f"{scheme}://{BUCKET}/{key}" for scheme in ("az", "abfs", "abfss")]
    LakeTable.create(spellings[0], {"schema": "id BIGINT"})
    for url in spellings:
        assert LakeTable.open(url).commit_log.head() == 0 and Storage(url).uri("x") == f"{url}/x"
    assert stores.store_of(spellings[2]) is stores.store_of(spellings[0])


def test_gcs_urls_reach_one_table_and_spark_is_handed_gs(gcs_server: StoreServer) -> None:
    root = gcs_server.root()
    LakeTable.create(root.replace("gs://", "gcs://"), {"schema": "id BIGINT"})
    assert LakeTable.open(root).commit_log.head() == 0
    assert Storage(root.replace("gs://", "gcs://")).uri("x") == f"{root}/x"  # the GCS connector's scheme


def test_a_missing_bucket_is_an_error_not_an_empty_table(store: StoreServer) -> None:
    url = store.url.replace(BUCKET, "no-such-bucket") + "/t"
    with pytest.raises((LakeError, OSError)):
        LakeTable.open(url)


def lost_answer(store: StoreServer) -> Exception:
    """What the store's client raises when its upload landed and no answer came back (after its own retries): gcsfs's
    HttpError for a 503, the Azure SDK's ServiceResponseError for a dropped connection. Neither is an OSError."""
    if store.name == "gcs":
        from gcsfs.retry import HttpError

        return HttpError({"code": 503, "message": "Service Unavailable"})
    from azure.core.exceptions import ServiceResponseError

    return ServiceResponseError("Connection aborted: the connection was reset before a response")


@pytest.mark.parametrize("store", ["gcs", "azure"], indirect=True)
def test_a_create_whose_answer_was_lost_is_read_back(store: StoreServer, store_root: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The upload landed, the client raised its own error (not an OSError): the key is read back, and our bytes
    there are our win — the writer must not abort an entry that is committed. Another error with no key is raised
    as it came."""
    table = Storage(store_root)
    fs = table.filesystem
    landed = fs.pipe_file

    def lossy(path: str, data: bytes, **kwargs: object) -> None:
        landed(path, data, **kwargs)
        raise lost_answer(store)

    monkeypatch.setattr(fs, "pipe_file", lossy)
    assert table.create_json("_lake/log/a.json", {"who": "one"})  # landed: read back, ours
    assert not table.create_json("_lake/log/a.json", {"who": "other"})  # exists: the store's own answer

    def failing(path: str, data: bytes, **kwargs: object) -> None:
        raise lost_answer(store)

    monkeypatch.setattr(fs, "pipe_file", failing)
    with pytest.raises(type(lost_answer(store))):
        table.create_json("_lake/log/b.json", {"who": "one"})  # nothing landed: the error, as it came

