"""The test S3 server's counts per client (`tests/s3_server.py`), which the benchmarks use to tell Spark's S3A
connector from the lake's Python side: a client is told by its User-Agent, and a batch delete (a POST on the
bucket) is counted under the kind of the keys it deletes. (S3A's own User-Agent is counted as `spark` by
`benchmarks/bench_store_commits.py --parts spark`, which fails if Spark's write made no request.)"""

from __future__ import annotations

from airflow_lake.lake.format.storage import Storage
from tests.s3_server import S3Server, client_of

S3A_AGENT = ("Hadoop 3.5.0 aws-sdk-java/2.35.4 md/io#sync md/http#Apache ua/2.1 api/S3#2.35.x os/Linux#6.18 "
             "lang/java#17.0.15")


def test_clients_are_told_by_their_user_agent() -> None:
    assert client_of(S3A_AGENT) == "spark"
    assert client_of("Hadoop_3.5.0 s3analyticsaccelerator/1.3.1") == "spark"  # S3A's reads of Parquet footers
    assert client_of("aiobotocore/3.10.0 md/Botocore#1.43.117 ua/2.1 lang/python#3.11.7") == "python"  # s3fs
    assert client_of("Boto3/1.43.117 md/Botocore#1.43.117") == "python"
    assert client_of("curl/8.5.0") == "other"


def test_requests_are_counted_per_client_and_a_batch_delete_by_its_keys(s3_server: S3Server, s3_root: str) -> None:
    store = Storage(s3_root)
    store.write_bytes("_lake/pending/a.json", b"{}")
    store.write_bytes("data/w1/part-0.parquet", b"PAR1")
    mark, clients = s3_server.counter.mark(), s3_server.counter.mark_clients()
    store.delete_tree("_lake")  # one listing, one batch delete
    assert s3_server.counter.since(mark) == {("LIST", "meta"): 1, ("BATCH_DELETE", "bucket"): 1}
    assert s3_server.counter.since_clients(clients) == {("python", "LIST", "meta"): 1,
                                                        ("python", "BATCH_DELETE", "pending"): 1}
    clients = s3_server.counter.mark_clients()
    s3_server.client.delete_objects(Bucket=s3_server.bucket, Delete={"Objects": [
        {"Key": s3_server.key_of(f"{s3_root}/data/w1/part-0.parquet")}]})
    assert s3_server.counter.since_clients(clients) == {("python", "BATCH_DELETE", "data"): 1}
    assert store.walk_files("") == []  # the body put back for moto: the delete happened
