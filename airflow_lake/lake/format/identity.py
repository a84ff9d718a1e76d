"""One identity per table, whatever the spelling of its URL.

A table is reached by many spellings: `s3://b/t` and `s3a://b/t` (the project itself hands Spark the second for the
first: `stores.hadoop_url`), `gs://` and `gcs://`, `S3://`, a trailing '/', a local path through a symlink, a
`file://` URL. Anything that asks "is this the same table?" asks here, never by comparing URL strings:

- `table_id`: a random id written in the table's first log entry (`create`) and carried by every state and
  checkpoint. It answers "same table?" for any two spellings, mounts included: the isolation pin of a job's reads
  of its own table and the reads its commit is checked against are keyed by it (`TableMetadata.identity`).
- `canonical_url`: the fallback of a table created before ids existed, and the name of a table where people and
  other systems see it (its Airflow asset URI, its OpenLineage dataset, the Lake page's authorization): local paths
  by their real path (symlinks resolved), store URLs with the scheme the store's own fsspec protocol uses (`s3a`,
  `s3n` -> `s3`; `gcs` -> `gs`; `abfss` -> `abfs`), lower-case scheme, no trailing '/'. It is stable and readable;
  the id is not (a table recreated at the same URL gets a new one).
"""

from __future__ import annotations

import os
import uuid

from airflow_lake.lake.format import stores
from airflow_lake.lake.format.storage import is_local, normalize_url

TABLE_ID = "table_id"  # the metadata key of the create entry that holds it
_S3_ALIASES = {"s3n": "s3"}  # schemes Hadoop once used for S3 that `stores` does not serve itself


def new_table_id() -> str:
    """A fresh table id (32 hex digits)."""
    return uuid.uuid4().hex


def canonical_url(url: str | os.PathLike[str]) -> str:
    """The one spelling of a table's URL: a local table's real path (symlinks resolved, absolute, no trailing
    '/'), a store URL with its store's own scheme, lower case, and no trailing '/'."""
    text = normalize_url(url)  # absolute local path (file:// decoded), or the URL without trailing '/'
    if is_local(text):
        return os.path.realpath(text)
    scheme, sep, rest = text.partition("://")
    scheme = _S3_ALIASES.get(scheme.lower(), scheme.lower())
    store = stores.store_of(f"{scheme}{sep}")
    return f"{store.protocol if store else scheme}{sep}{rest}".rstrip("/")


def identity(table_id: str | None, url: str) -> str:
    """A table's identity: `id:<table id>`, or for a table created before ids, `url:<canonical URL>`."""
    return f"id:{table_id}" if table_id else f"url:{canonical_url(url)}"


__all__ = ["TABLE_ID", "canonical_url", "identity", "new_table_id"]
