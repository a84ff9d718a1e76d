"""What a primary-key table's files hold beyond its columns, the rows an upsert or a delete writes, and the
merge of a key's rows.

Every data file of a primary-key table (an upsert's delta files and compaction's base files alike) has the
table's columns and, per column merged by a last-wins operator (`merge_ops`):

- `__lake_v__<c>`: the version the value came from (NULL: the row does not set the column — a partial
  update, or a key that never had it);
- `__lake_q__<c>` (operators that rank values, `last_non_null`): whether the value qualifies;

per column merged by a commutative operator (`sum`, `max`, `min`): `__lake_v0__<c>` / `__lake_v__<c>`, the
oldest / newest version whose (non-NULL) value is folded into it; and per row:

- `__lake_seq`: the row's order within its upsert (0 in base files, whose versions are all distinct);
- `__lake_v` / `__lake_v0`: the newest / oldest version whose data the row holds (a delta row: both its
  version; a base row: the range compaction folded into it; NULL: the row holds no data, a delete);
- `__lake_d`: a delete at that version (a delta delete row), or in a base row the key's delete watermark.

A value's order stamp is (qualifies, version, seq); the highest wins. Versions are unique per upsert
(`versions.py`), so the stamp a base keeps orders it against any later upsert, lower versions included.

Versioned deletes. A key's watermark D is the highest `__lake_d` of its rows (NULL: never deleted). A delete
at version d removes what versions <= d said about the key, whatever the order upserts and deletes arrive in:

1. a last-wins value counts only if its version stamp is > D (`last_non_null` ranks among those only);
2. a commutative value (`sum`, `max`, `min`) counts only from rows whose oldest version `__lake_v0` is > D;
3. the key exists iff D is NULL or some row holds data of a version > D (a key upserted with only its key
   columns exists too: `__lake_v` says so);
4. within one version a delete wins: an upsert and a delete of a key at the same version (delete markers
   in the same source) leave it deleted. Give the re-insert a higher version to keep it.

Compaction writes per key the watermark D (`__lake_d`) and only what is newer; a key with nothing newer
becomes a tombstone (the key, its partition, D; every value and stamp NULL). Tombstones are never dropped:
any later upsert may carry a version <= D (a backfill), and only the tombstone keeps it deleted.

Base files. In a base file `__lake_v` is NULL exactly on tombstones: a base row that holds data has a version,
and a key that exists with no known version (rows written before versioned deletes, no stamp at all) gets
UNKNOWN_NEWEST, which no watermark is below, so it merges as NULL did. Compaction writes the tombstones of a
partition into files of their own (`compact.py`), so a base file's `__lake_v` stats tell what it is: null count 0,
every row holds data (what another engine may read as the table); null count = rows, only tombstones
(`only_tombstones`; a versioned delete's delta file looks the same: the log tells them apart, its version index
names the upserts and deletes). A base file with both (written by a compaction before the split: tombstones or
data of no known version beside data) is compacted again (`mixes_tombstones`).

Rule 2 is exact for delta rows (one version each). A base row folds a commutative column's values over the
versions that set it, [v0, v], kept per column (`__lake_v0__<c>`, `__lake_v__<c>`; files written before that
have only the row's range, which holds it); a delete at d with v0 <= d < v would have to split that fold, which
nothing can: such a delete (a delete operation, or delete markers in an upsert) is refused before it commits
(`deletes.check_deletes`, naming key, column and range), a compaction racing a delete conflicts (it reads the
delete rows of its partitions), and a merge that meets such a row anyway fails rather than return a wrong sum.

Rows written before versioned deletes have no `__lake_v` (nor `__lake_d`). Reads derive it (`with_row_stamps`):
a delta row (`__lake_seq` != 0) has one version, which its last-wins stamps give exactly; for any other such row
(a base row, or a row of only commutative values) the highest stamp is a lower bound of its newest version, and
the highest version the table ever applied an upper one: `__lake_v0` = UNKNOWN_OLDEST marks the row uncertain,
and compaction keeps it so. A delete of such a key is exact below the lower bound (for last-wins values: the
key stays, its stamps decide per column) and at or above the upper bound (everything goes); in between it is
refused, as is one that would split the row's commutative values (their range is unknown).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from airflow_lake.lake.spec import merge_ops, sql_text
from airflow_lake.lake.spec.table_spec import Column as SpecColumn
from airflow_lake.lake.spec.table_spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from airflow_lake.lake.format.data_files import DataFile

SEQ = "__lake_seq"
NEWEST = "__lake_v"  # the newest version whose data the row holds
OLDEST = "__lake_v0"  # the oldest version folded into the row's commutative values
DELETED = "__lake_d"  # a delete at this version (delta) / the key's delete watermark (base)
WATERMARK = "__lake_watermark"  # the key's watermark, on every row while merging (never stored)
UNKNOWN_OLDEST = -(1 << 63)  # OLDEST of a base row folded from rows of unknown version (written before deletes)
# NEWEST of a base row that holds data of no known version at all: never NULL there, NULL marks a tombstone
UNKNOWN_NEWEST = UNKNOWN_OLDEST
ROW_STAMPS = (NEWEST, OLDEST, DELETED)
EXISTS = "__lake_exists"  # whether a merged key exists (never stored)


def version_of(column: str) -> str:
    return f"__lake_v__{column}"


def qualified_of(column: str) -> str:
    return f"__lake_q__{column}"


def oldest_of(column: str) -> str:
    """The oldest version folded into a commutative column's value (`version_of`: the newest)."""
    return f"__lake_v0__{column}"


def value_columns(spec: TableSpec) -> list[str]:
    """The columns merged: neither key nor partition columns (a key is unique within a partition)."""
    return [c for c in spec.column_names if c not in spec.primary_key and c not in spec.partition_columns]


def operator_of(spec: TableSpec, column: str) -> merge_ops.MergeOperator:
    return merge_ops.operator(spec.merge_operators.get(column, merge_ops.DEFAULT))


def physical_spec(spec: TableSpec) -> TableSpec:
    """The spec of the files: the table's columns (key columns NOT NULL), then the stamps. It keeps the
    buckets and partitions, so the writer and the bucketed reads handle it as any table."""
    columns = [dataclasses.replace(c, nullable=False) if c.name in spec.primary_key and c.name not in
               spec.partition_columns else c for c in spec.columns]
    for name in value_columns(spec):
        op = operator_of(spec, name)
        # stamps are named in the files after the column's physical name: they follow a rename
        physical = spec.physical_of(name)
        columns.append(SpecColumn(version_of(name), "bigint", physical=version_of(physical)))
        if op.qualified:
            columns.append(SpecColumn(qualified_of(name), "boolean", physical=qualified_of(physical)))
        if not op.stamped:
            columns.append(SpecColumn(oldest_of(name), "bigint", physical=oldest_of(physical)))
    columns.append(SpecColumn(SEQ, "bigint"))
    columns += [SpecColumn(name, "bigint") for name in ROW_STAMPS]
    return TableSpec(columns=tuple(columns), partition_columns=spec.partition_columns, bucket=spec.bucket,
                     properties=spec.properties)


def delta_rows(df: DataFrame, spec: TableSpec, present: Collection[str], version: str,
               deleted: str | None = None) -> DataFrame:
    """An upsert's rows as files hold them: `df` has the key columns and the `present` value columns
    (conformed to the table's types); `version` is each row's version (a Spark SQL expression). Rows where
    `deleted` (a SQL expression) is true are deletes of their key at their version: they keep only the key (and
    partition) and `__lake_d`.

    One projection as SQL text (`sql_text`), parsed by Spark in one call: built from DataFrame functions it took
    ~100 calls into the JVM per upsert (~0.05 s quiet). The same expressions as those functions build: a stamp is
    `CASE WHEN NOT deleted THEN ... ELSE CAST(NULL AS type) END` as `when(~deleted, ...).otherwise(...)` was."""
    from pyspark.sql import functions as F

    def unless_deleted(value: str, type_name: str) -> str:
        return value if deleted is None else \
            f"CASE WHEN (NOT ({deleted})) THEN {value} ELSE {sql_text.null_of(type_name)} END"

    def named(value: str, name: str) -> str:
        return f"{value} AS {sql_text.ident(name)}"

    out: list[str] = []
    stamps: list[str | Column] = []
    for col in spec.columns:
        name = col.name
        keyed = name in spec.primary_key or name in spec.partition_columns
        given = name in present or keyed
        value = sql_text.ident(name) if given else sql_text.null_of(col.type)
        out.append(named(value if keyed else unless_deleted(value, col.type), name))
        if keyed:
            continue
        op = operator_of(spec, name)
        if not op.stamped:  # the range of versions folded into the value: only a value counts (sum skips NULL)
            folded = f"CASE WHEN ({value} IS NOT NULL) THEN {version} END" if given else sql_text.null_of("bigint")
            stamps += [named(unless_deleted(folded, "bigint"), version_of(name)),
                       named(unless_deleted(folded, "bigint"), oldest_of(name))]
            continue
        stamps.append(named(unless_deleted(version if given else sql_text.null_of("bigint"), "bigint"),
                            version_of(name)))
        if op.qualified:
            stamps.append(_qualified(op, spec, name, given=given, deleted=deleted,
                                     unless_deleted=unless_deleted))
    row_version = unless_deleted(version, "bigint")
    deleted_at = sql_text.null_of("bigint") if deleted is None else \
        f"CAST(CASE WHEN ({deleted}) THEN {version} END AS BIGINT)"
    rest = [f"monotonically_increasing_id() AS {SEQ}", named(row_version, NEWEST), named(row_version, OLDEST),
            named(deleted_at, DELETED)]
    if all(isinstance(s, str) for s in stamps):
        return df.selectExpr(*out, *[str(s) for s in stamps], *rest)
    return df.select(*[F.expr(e) if isinstance(e, str) else e for e in [*out, *stamps, *rest]])


def _qualified(op: merge_ops.MergeOperator, spec: TableSpec, name: str, *, given: bool, deleted: str | None,
               unless_deleted: Callable[[str, str], str]) -> str | Column:
    """The `__lake_q__` stamp of a column merged by a qualifying operator: SQL text, or a Column built from the
    operator's `qualifies` when it has no SQL form (`merge_ops.qualifies_as_sql`)."""
    from pyspark.sql import functions as F

    nulls = spec.null_values.get(name, ())
    try:
        condition = merge_ops.qualifies_as_sql(op, sql_text.ident(name), nulls) if given else None
    except NotImplementedError:
        column = op.qualifies(F.col(sql_text.ident(name)), nulls)
        value = column if column is not None else F.lit(None).cast("boolean")
        if deleted is not None:
            value = F.when(~F.expr(deleted), value).otherwise(F.lit(None).cast("boolean"))
        return value.alias(qualified_of(name))
    return f"{unless_deleted(condition or sql_text.null_of('boolean'), 'boolean')} AS " \
           f"{sql_text.ident(qualified_of(name))}"


def only_tombstones(data_file: DataFile) -> bool:
    """Whether every row of the file holds no data (`__lake_v` NULL, by its stats): a base file of tombstones, or a
    versioned delete's delta file. A file written before versioned deletes has no `__lake_v` and holds none."""
    stats = data_file.stats.get(NEWEST)
    return stats is not None and stats.null_count >= data_file.rows


def mixes_tombstones(data_file: DataFile) -> bool:
    """Whether a base file has rows of NULL `__lake_v` beside rows with a version (by its stats), as compactions
    wrote them before tombstones got files of their own: tombstones, or data of no known version."""
    stats = data_file.stats.get(NEWEST)
    return stats is not None and 0 < stats.null_count < data_file.rows


def has_deletes(files: Iterable[DataFile]) -> bool:
    """Whether any of the files may hold a delete row or a watermark (by its stats; a file written before
    deletes has no `__lake_d` and holds none)."""
    for data_file in files:
        stats = data_file.stats.get(DELETED)
        if stats is not None and stats.null_count < data_file.rows:
            return True
    return False


def row_stamped(spec: TableSpec, files: Sequence[DataFile]) -> list[str]:
    """The `last` columns (last-wins, not qualified) whose version stamp the files' stats prove equal to the
    row's `__lake_v` on every row read: in each file both have no NULL and one value, the same (min = max: a
    delta file of an upsert that set the column on every row). Their values then all come from one row, the
    key's row of the highest (version, seq), which the merge finds once for all of them (`merge_aggregates`)
    instead of once per column. Fewer than two such columns (or a file that proves nothing): none."""
    candidates = [c for c in value_columns(spec) if operator_of(spec, c).stamped and not operator_of(spec, c).qualified]
    if len(candidates) < 2 or not files:
        return []
    stamps = {c: version_of(spec.physical_of(c)) for c in candidates}  # stats are kept by physical name
    for data_file in files:
        newest = data_file.stats.get(NEWEST)
        if newest is None or newest.null_count or newest.min is None or newest.min != newest.max:
            return []
        for column in list(candidates):
            stats = data_file.stats.get(stamps[column])
            if stats is None or stats.null_count or stats.min != newest.min or stats.max != newest.max:
                candidates.remove(column)
        if len(candidates) < 2:
            return []
    return candidates


def with_row_stamps(df: DataFrame, spec: TableSpec, files: Sequence[DataFile] | None = None) -> DataFrame:
    """Scanned rows with the row stamps of rows written before versioned deletes derived (module docstring):
    `__lake_v` from their last-wins stamps; `__lake_v0` the same for a delta row, else UNKNOWN_OLDEST. When the
    stats of the `files` read prove every row has a `__lake_v`, there is nothing to derive: the rows as they are
    (the scan then reads no stamp the merge does not use)."""
    from pyspark.sql import functions as F

    if files and all((stats := f.stats.get(NEWEST)) is not None and not stats.null_count for f in files):
        return df

    stamps = [F.col(version_of(c)) for c in value_columns(spec) if operator_of(spec, c).stamped]
    derived = F.greatest(*stamps) if len(stamps) > 1 else stamps[0] if stamps else F.lit(None).cast("bigint")
    legacy = F.col(NEWEST).isNull() & F.col(DELETED).isNull()
    exact = (F.col(SEQ) != 0) & derived.isNotNull()
    return df.withColumns({
        NEWEST: F.when(legacy, derived).otherwise(F.col(NEWEST)),
        OLDEST: F.when(legacy & exact, derived).when(legacy, F.lit(UNKNOWN_OLDEST)).otherwise(F.col(OLDEST)),
    })


def folded_range(column: str) -> tuple[Column, Column]:
    """The oldest and newest version folded into a commutative column's value in a row: its own range, or the
    row's in files written before ranges were kept per column (it holds the column's)."""
    from pyspark.sql import functions as F

    return (F.coalesce(F.col(oldest_of(column)), F.col(OLDEST)),
            F.coalesce(F.col(version_of(column)), F.col(NEWEST)))


def merge_aggregates(spec: TableSpec, *, keep_stamps: bool, deletes: bool = False,
                     shared: Collection[str] = ()) -> list[Column]:
    """The aggregates that merge a key's rows (group by the partition and key columns; rows through
    `with_row_stamps`): the table's value columns, and with `keep_stamps` the stamps of the result (for base
    files). With `deletes`, each row carries its key's watermark in `WATERMARK` (a window over the same
    grouping), and the rules of the module docstring apply; `DELETED` is then the key's watermark and `exists`
    whether the key exists. `shared`: `last` columns whose stamp is the row's `__lake_v` on every row
    (`row_stamped`), merged by one `max_by` over the row's (version, seq) that picks their values together."""
    from pyspark.sql import functions as F

    watermark = F.col(WATERMARK) if deletes else None
    newest, oldest, deleted = F.col(NEWEST), F.col(OLDEST), F.col(DELETED)

    def newer(version: Column) -> Column:  # a version not removed by the key's watermark
        return version.isNotNull() if watermark is None else version.isNotNull() & (
            watermark.isNull() | (version > watermark))

    # Per column, `max_by(value, (v, s))` compares and copies on every row, and the sort aggregate runs
    # interpreted: with the same order on every row for these columns, one `max_by` over a struct of them picks
    # the same row (ties too: equal orders in every column, the same first row) at one comparison per row
    # (measured: docs/benchmarks.md 17.1d). Spark computes the repeated aggregate once.
    together = [c for c in value_columns(spec) if c in shared]
    winner = F.max_by(F.struct(*[F.col(f"`{c}`").alias(f"_{i}") for i, c in enumerate(together)]),
                      F.when(newer(newest), F.struct(newest.alias("v"), F.col(SEQ).alias("s")))) if together else None
    splits: list[Column] = []
    out: list[Column] = []
    for name in value_columns(spec):
        op = operator_of(spec, name)
        value = F.col(f"`{name}`")
        if winner is not None and name in together:
            out.append(winner[f"_{together.index(name)}"].alias(name))
            if keep_stamps:  # the max of (v, s)'s v: the newest version kept
                out.append(F.max(F.when(newer(newest), newest)).alias(version_of(name)))
            continue
        if not op.stamped:
            low, high = folded_range(name)
            alive = value.isNotNull() if watermark is None else value.isNotNull() & (
                watermark.isNull() | (low > watermark))
            out.append(op.aggregate(F.when(alive, value)).cast(spec.column(name).type).alias(name))
            if keep_stamps:
                out += [F.max(F.when(alive, high)).alias(version_of(name)),
                        F.min(F.when(alive, low)).alias(oldest_of(name))]
            if watermark is not None:  # a fold across the watermark cannot be split (module docstring)
                splits.append(value.isNotNull() & (low <= watermark) & (high > watermark))
            continue
        fields = [F.col(qualified_of(name)).alias("q")] if op.qualified else []
        fields += [F.col(version_of(name)).alias("v"), F.col(SEQ).alias("s")]
        order = F.when(newer(F.col(version_of(name))), F.struct(*fields))  # NULL: not set or deleted, never wins
        out.append(F.max_by(value, order).alias(name))
        if keep_stamps:
            best = F.max(order)
            out.append(best["v"].alias(version_of(name)))
            if op.qualified:
                out.append(best["q"].alias(qualified_of(name)))
    # a row of unknown version that still holds data keeps the base row uncertain (module docstring)
    unversioned_alive = newest.isNull() & deleted.isNull() & (F.lit(True) if watermark is None else
                                                              watermark.isNull())
    uncertain = F.max(((oldest == UNKNOWN_OLDEST) & (newer(newest) | unversioned_alive)).cast("int")) == 1
    watermark_out = F.max(deleted)
    if watermark is not None:
        split = F.greatest(*splits, F.lit(False)) if splits else F.lit(False)
        bad = F.max((watermark.isNotNull() & split).cast("int")) == 1
        failure = F.raise_error(F.lit(
            "a key's rows cannot be merged exactly with its delete watermark (a compacted sum/max/min straddles "
            "it): the delete should have been refused. Report this."))
        watermark_out = F.when(bad, failure.cast("bigint")).otherwise(watermark_out)
    if keep_stamps or deletes:
        out.append(watermark_out.alias(DELETED))
    if keep_stamps:
        newest_out = F.max(F.when(newer(newest), newest))
        # a key never deleted exists: with no known version, UNKNOWN_NEWEST (NULL marks a tombstone)
        out.append(F.when(F.max(deleted).isNull(), F.coalesce(newest_out, F.lit(UNKNOWN_NEWEST).cast("bigint")))
                   .otherwise(newest_out).alias(NEWEST))
        out.append(F.when(uncertain, F.lit(UNKNOWN_OLDEST).cast("bigint"))
                   .otherwise(F.min(F.when(newer(newest), oldest))).alias(OLDEST))
    if deletes:
        exists = F.max(deleted).isNull() | F.max(F.when(newer(newest), 1)).isNotNull()
        out.append(F.when(bad, failure.cast("boolean")).otherwise(exists).alias(EXISTS))  # kept by every read
    return out
