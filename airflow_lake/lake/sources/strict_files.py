"""Reading a write's source files strictly: CSV headers and JSON keys must name the table's columns, and a value
that does not parse as its column's type fails the write instead of becoming NULL (unless relaxed on purpose)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from airflow_lake.lake.errors import LakeSchemaError, LakeSpecError
from airflow_lake.lake.format import stores
from airflow_lake.lake.format.stores import hadoop_url
from airflow_lake.lake.sources import nanos
from airflow_lake.lake.sources.untyped import untyped_nulls
from airflow_lake.lake.spark.schema import check_columns, spark_type
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

CORRUPT = "_airflow_lake_corrupt_record"
STRICT, RELAXED_MODES = "FAILFAST", ("PERMISSIVE", "DROPMALFORMED")
log = logging.getLogger(__name__)
LAKE_LOG = ("_lake", "log")
_GLOB = re.compile(r"[*?\[\]{}\\]")  # the characters of a Hadoop glob (a backslash escapes)


def refuse_lake_table_path(path: str, field: str = "source.path") -> None:
    """Refuse a local path that reads a lake table's files, whatever its spelling (`file:` URLs, `..`, `//`,
    trailing slashes, symlinks): a path inside a table (its directories also hold replaced, no longer live
    files), or a directory above one (Spark reads a directory's files recursively). A glob is checked here up to
    its first wildcard; the files it matches are checked when Spark lists them (`refuse_listed_lake_files`)."""
    local = local_path(path)
    if local is None:
        _refuse_store_table_path(path, field)
        return
    parts = local.split("/")
    wild = next((i for i, part in enumerate(parts) if _GLOB.search(part)), len(parts))
    fixed = "/".join(parts[:wild]) or ("/" if local.startswith("/") else ".")
    # Hadoop drops `..` by the text (`link/..` is the directory holding the link); the OS follows the link
    # first: check both readings
    for prefix in {os.path.realpath(os.path.abspath(fixed)), os.path.realpath(fixed)}:
        root = table_root(Path(prefix))
        if root is not None:
            raise _lake_table_error(path, f"is inside the lake table {str(root)!r}", root, field)
        below = _table_below(Path(prefix)) if wild == len(parts) and os.path.isdir(prefix) else None
        if below is not None:
            raise _lake_table_error(path, f"holds the lake table {str(below)!r} (Spark reads the files of a "
                                    "directory and of every directory below it)", below, field)


def _refuse_store_table_path(path: str, field: str) -> None:
    """`refuse_lake_table_path` of a URL on a known store (S3, GCS, Azure): the path up to its first wildcard lies
    in a table (a prefix above it holds `_lake/log/`: one listing of at most one key per level), or, without a
    wildcard, holds one below it (one listing of every key under it, as Spark would list them). The check is made
    with this process's access to the store: where it has none (Spark's side may read buckets the Airflow worker
    cannot), or for other URLs, nothing is checked here."""
    if stores.store_of(path) is None:
        return
    try:
        fs, key = stores.open_fs(path)
        s3 = stores.is_s3(path, fs)
        parts = key.split("/")
        wild = next((i for i, part in enumerate(parts) if _GLOB.search(part)), len(parts))
        fixed = parts[:wild]
        for end in range(len(fixed), 1, -1):  # a table's root is below the bucket (container)
            candidate = "/".join(fixed[:end])
            if _has_key(fs, f"{candidate}/{'/'.join(LAKE_LOG)}/", s3):
                root = _url_of(path, key, candidate)
                raise _lake_table_error(path, f"is inside the lake table {root!r}", root, field)
        if wild == len(parts) and len(fixed) > 1:
            below = _store_table_below(fs, "/".join(fixed), s3)
            if below is not None:
                root = _url_of(path, key, below)
                raise _lake_table_error(path, f"holds the lake table {root!r} (Spark reads the files of a directory "
                                        "and of every directory below it)", root, field)
    except LakeSpecError:
        raise
    except Exception as err:  # no access, no credentials, no package: Spark's side may still read it
        log.debug("source %s: not checked for lake tables (%s: %s)", path, type(err).__name__, err)


def _has_key(fs: Any, prefix: str, s3: bool) -> bool:
    """Whether any key starts with `prefix` ('bucket/key/.../', a directory's)."""
    if s3:
        return bool(stores.s3_list(fs, prefix, delimiter="", max_keys=1)[0])
    try:
        return bool(fs.ls(prefix.rstrip("/"), detail=False))
    except FileNotFoundError:
        return False


def _store_table_below(fs: Any, prefix: str, s3: bool) -> str | None:
    """The store path of a lake table below `prefix`, if any (keys listed once, every level)."""
    if s3:
        keys = [f"{prefix}/{k}" for k in stores.s3_list(fs, prefix + "/", delimiter="")[0]]
    else:
        keys = [str(k) for k in fs.find(prefix)]
    marker = "/" + "/".join(LAKE_LOG) + "/"
    for found in keys:
        at = found.find(marker)
        if at >= 0:
            return found[:at]
    return None


def _url_of(url: str, key: str, path: str) -> str:
    """The URL of store path `path`, spelled as `url` (whose store path is `key`) spells its prefix."""
    given = url.rstrip("/")
    return given[:len(given) - len(key)] + path if given.endswith(key) else path


def refuse_listed_lake_files(spark: SparkSession, path: str, options: Mapping[str, str],
                             field: str = "source.path") -> None:
    """Refuse a local path source any of whose files, as Spark lists them (its globs, `recursiveFileLookup`,
    `pathGlobFilter`), lies in a lake table. Lists the files only: nothing is read."""
    local = local_path(path)
    if local is None:
        return
    if not _GLOB.search(local) and not _links_into_a_table(local):
        # No glob: `refuse_lake_table_path` has checked the path and every directory below it (symlinks
        # followed); with no symlinked file either, Spark's listing would find nothing more (and costs a job)
        return
    # Spark lists every file below a directory either way; recursiveFileLookup only skips the partition
    # inference, which fails on a glob that matches several tables
    listing = {k: v for k, v in options.items() if k.lower() != "recursivefilelookup"}
    listing["recursiveFileLookup"] = "true"
    listed = spark.read.format("binaryFile").options(**listing).load(path).inputFiles()
    roots: dict[str, Path | None] = {}
    for uri in listed:
        file = local_path(uri)
        if file is None:
            continue
        directory = os.path.dirname(file)
        if directory not in roots:
            roots[directory] = table_root(Path(os.path.realpath(directory)))
        root = roots[directory]
        if root is None and os.path.islink(file):
            root = table_root(Path(os.path.realpath(file)))
        if root is not None:
            raise _lake_table_error(path, f"reads files of the lake table {str(root)!r} (such as {file!r})", root,
                                    field)


def _links_into_a_table(local: str) -> bool:
    """True unless no symlinked file below the local path `local` (both readings of `..`, symlinked directories
    followed, as Spark lists) may lead into a lake table: then only Spark's own listing can tell."""
    for start in {os.path.realpath(os.path.abspath(local)), os.path.realpath(local)}:
        if not os.path.isdir(start):
            continue  # a file: its real path was checked by `refuse_lake_table_path`
        seen: set[str] = set()
        stack = [start]
        while stack:
            current = os.path.realpath(stack.pop())
            if current in seen:
                continue
            seen.add(current)
            try:
                with os.scandir(current) as entries:
                    for entry in entries:
                        if entry.is_symlink() and not entry.is_dir(follow_symlinks=True):
                            return True
                        if entry.is_dir(follow_symlinks=True):
                            stack.append(entry.path)
            except OSError:
                return True  # unreadable here: let Spark's listing decide
    return False


def local_path(path: str) -> str | None:
    """The local file system path of a path or `file:` URL (as Hadoop reads it: `?` and `#` are part of the
    path, percent-escapes are decoded), or None for another store."""
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", path)
    if scheme is None or len(scheme.group(1)) == 1:  # no scheme (a Windows drive letter is none either)
        return path
    if scheme.group(1).lower() != "file":
        return None
    rest = path[scheme.end():]
    if rest.startswith("//"):
        authority, _, rest = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            return None
        rest = "/" + rest
    return unquote(rest)


def table_root(directory: Path) -> Path | None:
    """The lake table that `directory` (resolved) is or lies in, if any."""
    for candidate in (directory, *directory.parents):
        if candidate.joinpath(*LAKE_LOG).is_dir():
            return candidate
    return None


def _table_below(directory: Path) -> Path | None:
    """A lake table somewhere below `directory`, following symlinks as Spark's listing does."""
    seen: set[str] = set()
    stack = [str(directory)]
    while stack:
        current = os.path.realpath(stack.pop())
        if current in seen:
            continue
        seen.add(current)
        if os.path.isdir(os.path.join(current, *LAKE_LOG)):
            return Path(current)
        try:
            with os.scandir(current) as entries:
                stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=True))
        except OSError:
            continue
    return None


def _lake_table_error(path: str, problem: str, root: Path | str, field: str) -> LakeSpecError:
    example = {"query": "SELECT * FROM t", "tables": {"t": str(root)}}
    return LakeSpecError(field, f"{path!r} {problem}, whose directories also hold replaced files that are no "
                         "longer live.", f"Read the table with a query: {example}.")


def read_files(spark: SparkSession, path: str, fmt: str, options: Mapping[str, str], *, spec: TableSpec,
               field: str = "source", optional: Collection[str] = ()) -> DataFrame:
    """The files at `path` as a DataFrame of the source's own columns, checked as the format allows
    (`optional` columns may be missing from a CSV header or the JSON keys).

    A store URL is handed to Spark as its Hadoop file system names it (`s3://` as `s3a://`, `stores.hadoop_url`),
    as the lake's own tables are: a source spelled like the tables beside it reads the same; messages keep the
    user's spelling."""
    from pyspark.errors import AnalysisException

    opts = {k: v for k, v in options.items() if k.lower() != "mode"}
    mode = read_mode(options, field)
    url = hadoop_url(path)
    try:
        refuse_listed_lake_files(spark, path, opts, f"{field}.path")
        if fmt == "csv":
            return _read_csv(spark, path, opts, mode, spec=spec, field=field, optional=optional, url=url)
        if fmt == "json":
            return _read_json(spark, path, opts, mode, spec=spec, field=field, optional=optional, url=url)
        df = spark.read.options(**opts).format(fmt).load(url)
        return untyped_nulls(df, path) if fmt == "parquet" else df
    except AnalysisException as err:
        raise _read_error(err, path, fmt, field) from err


def read_mode(options: Mapping[str, str], field: str = "source") -> str:
    """The value check asked for in `options.mode`: FAILFAST (the default), PERMISSIVE or DROPMALFORMED."""
    mode = next((str(v).upper() for k, v in options.items() if k.lower() == "mode"), STRICT)
    if mode not in (STRICT, *RELAXED_MODES):
        raise LakeSpecError(f"{field}.options.mode", f"unknown mode {mode!r}.",
                            f"Use {STRICT} (the default), PERMISSIVE or DROPMALFORMED.")
    return mode


def _read_error(err: Exception, path: str, fmt: str, field: str) -> LakeSpecError | LakeSchemaError:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    duplicate = re.search(r"COLUMN_ALREADY_EXISTS\] The column (`[^`]*`)", text)
    if duplicate:
        return LakeSchemaError(f"the {fmt} files at {path!r} have two columns named {duplicate.group(1)} "
                               "(column names are case-insensitive, so 'id' and 'ID' differ only by case); nothing "
                               "was written. Fix: rename or drop one of them.")
    if "UNABLE_TO_INFER_SCHEMA" in text:
        return LakeSpecError(f"{field}.path", f"no {fmt} data in {path!r} (an empty directory or only empty "
                             "files).", "Point it at the files to write, or skip the write when there are none.")
    if "PATH_NOT_FOUND" in text:
        return LakeSpecError(f"{field}.path", f"{path!r} does not exist.", "Give an existing file or directory.")
    if (nanoseconds := nanos.read_error(text, path, field)) is not None:
        return nanoseconds
    return LakeSpecError(f"{field}.path", f"cannot read {path!r} as {fmt}: {text}",
                         f"Check the files and `{field}.options`.")


def _type_of(spec: TableSpec, name: str) -> str:
    return next(c.type for c in spec.columns if c.name.lower() == name.lower())


def _is_true(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() == "true"


def _option(opts: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in opts.items() if k.lower() == name.lower()), None)


def _read_csv(spark: SparkSession, path: str, opts: dict[str, str], mode: str, *, spec: TableSpec,
              field: str, optional: Collection[str] = (), url: str) -> DataFrame:
    header = _is_true(_option(opts, "header"), True)
    base = {k: v for k, v in opts.items() if k.lower() not in ("header", "inferschema", "enforceschema")}
    first = spark.read.options(**base).option("header", "false").csv(url).limit(1).collect()
    if not first:
        raise LakeSpecError(f"{field}.path", f"no csv data in {path!r} (an empty directory or only empty files).",
                            "Point it at the files to write, or skip the write when there are none.")
    tokens = [str(t) if t is not None else "" for t in first[0]]
    if header:
        names = tokens  # as Spark compares them with every file's header: " name" is not "name"
        check_columns(names, spec, "the CSV header", fix="name the header's columns as the table's (in any order)",
                      optional=optional)
    else:
        names = [c.name for c in spec.columns]
        if len(tokens) != len(names):
            raise LakeSchemaError(f"the CSV rows have {len(tokens)} fields but the table has {len(names)} columns "
                                  f"{names}; nothing was written. Fix: with header 'false' the fields are taken in "
                                  "table order: give one per column, or give the file a header.")
    reader = spark.read.options(**base).option("header", str(header).lower())
    if header:
        reader = reader.option("enforceSchema", "false")  # every file's header must match, not only the first
    return _strict(_typed(reader, names, mode, spec).csv(url), names, mode, spec, "CSV")


def _read_json(spark: SparkSession, path: str, opts: dict[str, str], mode: str, *, spec: TableSpec,
               field: str, optional: Collection[str] = (), url: str) -> DataFrame:
    base = {k: v for k, v in opts.items() if k.lower() != "columnnameofcorruptrecord"}
    # a schema-less read sees every key of every record, so a misspelt key is found, not dropped
    inferred = spark.read.options(**base).json(url).schema
    names = [f.name for f in inferred.fields if f.name != "_corrupt_record"]
    if not names:
        raise LakeSpecError(f"{field}.path", f"no json records in {path!r}.",
                            "Point it at files of JSON objects, one per line (or set options.multiLine 'true').")
    check_columns(names, spec, "the JSON keys", fix="name the keys as the table's columns", optional=optional)
    reader = spark.read.options(**base)
    return _strict(_typed(reader, names, mode, spec).json(url), names, mode, spec, "JSON")


def _typed(reader: DataFrameReader, names: list[str], mode: str, spec: TableSpec) -> DataFrameReader:
    """The reader with the table's types under the source's own column names (and a corrupt-record column)."""
    from pyspark.sql import types as T

    fields = [T.StructField(n, spark_type(_type_of(spec, n)), True) for n in names]
    if mode == STRICT:
        fields.append(T.StructField(CORRUPT, T.StringType(), True))
        reader = reader.option("columnNameOfCorruptRecord", CORRUPT).option("mode", "PERMISSIVE")
    else:
        reader = reader.option("mode", mode)
    return reader.schema(T.StructType(fields))


def _strict(df: DataFrame, names: list[str], mode: str, spec: TableSpec, fmt: str) -> DataFrame:
    """In strict mode, a malformed record raises a data error (inside the write) naming the record."""
    from pyspark.sql import functions as F

    from airflow_lake.lake.spark.file_writer import DATA_ERROR

    if mode != STRICT:
        return df
    types = ", ".join(f"{n} {_type_of(spec, n).upper()}" for n in names)
    bad = F.col(CORRUPT)
    empty = F.concat_ws(", ", *[F.when(F.col(f"`{n}`").isNull(), F.lit(n)) for n in names])
    message = F.concat(
        F.lit(f"{DATA_ERROR}: a {fmt} record does not parse as the table's types ({types}): "),
        F.regexp_replace(F.substring(bad, 1, 200), r"\s+", " "),
        F.lit(" (column(s) that did not parse or are empty: "), empty,
        F.lit("); nothing was committed. Fix: correct the value, or set source.options.mode to 'PERMISSIVE' "
              "(malformed values become NULL) or 'DROPMALFORMED' (such records are skipped)."))
    first = F.col(f"`{names[0]}`")
    return df.withColumn(names[0], F.when(bad.isNotNull(), F.raise_error(message)).otherwise(first)).drop(CORRUPT)


_CSV_HEADER = re.compile(r"CSV header does not conform to the schema\.\s*Header: ([^\n]*)\n\s*Schema: ([^\n]*)\n"
                         r"\s*Expected: ([^\n]*?) but found: ([^\n]*)\n\s*CSV file: ([^\n]*)")


def source_error(err: Exception) -> LakeSchemaError | LakeSpecError | None:
    """A clear error for a source file that Spark refused while the write ran (a CSV file whose header differs
    from the first file's, a Parquet file with nanosecond timestamps), or None."""
    match = _CSV_HEADER.search(str(err))
    if match is None:
        return nanos.mismatch_error(str(err))
    header, schema, expected, found, file = (g.strip() for g in match.groups())
    return LakeSchemaError(f"the CSV file {file} has the header [{header}] but the first file has [{schema}] "
                           f"(expected {expected!r}, found {found!r}); nothing was committed. Fix: give every "
                           "file the same header, or write the files separately.")
