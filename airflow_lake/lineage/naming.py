"""Dataset names per the OpenLineage naming spec: a namespace (the data source) and a name within it.

Local paths are namespace `file` and the real path (what Airflow's own `file://` assets translate to, so a
lake table's Asset and its OpenLineage dataset are one node); object stores are `scheme://bucket` and the key
without a leading slash (`s3a`/`s3n` are `s3`, `gcs` is `gs`, as Spark's OpenLineage integration reports them);
any other scheme (hdfs, ...) is `scheme://authority` and the path.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from airflow_lake.lake.format.identity import canonical_url
from airflow_lake.lake.format.storage import is_local

# scheme as written -> scheme OpenLineage names the store by; their names are keys (no leading slash)
OBJECT_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs", "abfs": "abfs", "abfss": "abfss",
                 "wasb": "wasb", "wasbs": "wasbs", "oss": "oss", "cos": "cos", "obs": "obs"}
_GLOB = re.compile(r"[*?\[{]")


def dataset_id(url: str) -> tuple[str, str]:
    """(namespace, name) of the table or files at `url` (a path or URL)."""
    if is_local(url):
        return "file", canonical_url(url)  # the real path: the name the table's asset uses (`assets.table_uri`)
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme in OBJECT_STORES:
        return f"{OBJECT_STORES[scheme]}://{parts.netloc}", parts.path.strip("/")
    return f"{scheme}://{parts.netloc}", parts.path.rstrip("/") or "/"


def source_id(path: str) -> tuple[str, str]:
    """(namespace, name) of a source path that may be a glob: the directory above its first wildcard, as
    Spark's OpenLineage integration names what a glob read (a name with `*` in it matches no other job's)."""
    if not _GLOB.search(path):
        return dataset_id(path)
    parts = path.split("/")
    fixed = next(i for i, part in enumerate(parts) if _GLOB.search(part))
    prefix = "/".join(parts[:fixed]) or os.sep
    return dataset_id(prefix)
