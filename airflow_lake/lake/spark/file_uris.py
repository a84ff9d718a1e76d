"""Data file paths in the form Spark reports them (`_metadata.file_path`), and back to table paths.

Spark names a file by its Hadoop `Path.toUri().toString()`: `file:/abs/dir/day=a%20b/part-...parquet` locally,
`s3a://bucket/key` on a store. The path is quoted as `java.net.URI`'s multi-argument constructors quote it: ASCII
outside the legal path characters (and `%` always) as `%XX` of the byte, non-ASCII space and control characters as
the `%XX` of their UTF-8 bytes, every other character as it is. Partition directories hold Hive's escapes
(`%2F` for `/`), which this quoting then escapes again (`%252F`).
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from airflow_lake.lake.format.storage import Storage

# java.net.URI: unreserved (alphanumerics and -_.!~*'()), the punctuation ;/:@&=+$, of a path
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'();/:@&=+$,")


def _quote(char: str) -> str:
    if char in _LEGAL:
        return char
    if ord(char) < 0x80 or _is_space_or_control(char):
        return "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return char


def _is_space_or_control(char: str) -> bool:
    """Java's `Character.isSpaceChar` (Unicode Zs, Zl, Zp) or `isISOControl` (U+0080-U+009F) for non-ASCII."""
    import unicodedata

    return unicodedata.category(char) in ("Zs", "Zl", "Zp") or 0x80 <= ord(char) <= 0x9F


def spark_file_uri(storage: Storage, rel: str) -> str:
    """The `_metadata.file_path` Spark reports for the table path `rel`."""
    if storage.local:
        return "file:" + "".join(map(_quote, storage.path(rel)))
    parts = urlsplit(storage.uri(rel))
    return f"{parts.scheme}://{parts.netloc}" + "".join(map(_quote, unquote(parts.path)))


def table_path(storage: Storage, reported: str) -> str | None:
    """The table path of a file Spark reported (`_metadata.file_path`); None if it lies outside the table."""
    parts = urlsplit(reported)
    path = unquote(parts.path)
    root = storage.path("") if storage.local else "/" + urlsplit(storage.uri("")).path.lstrip("/")
    if not storage.local:
        path = "/" + path.lstrip("/")
    root = root.rstrip("/")
    return path[len(root) + 1:] if path.startswith(root + "/") else None
