"""An independent computation of a merged primary-key table, with pandas, over the inputs in version order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from airflow_lake.datagen import bdci


def merge(batches: Sequence[tuple[int, pd.DataFrame]], key: str = "uuid",
          operators: Mapping[str, str] | None = None, null_values: Mapping[str, Sequence[str]] | None = None
          ) -> pd.DataFrame:
    """Rows of `batches` (version, frame) applied in version order, then row order: `sum` adds, `max` / `min`,
    `last_non_null` the last value that is neither NULL nor a null value (else the last value), the rest the
    last value; columns a batch lacks keep what they had. Sorted by key; all values as strings."""
    operators = dict(operators or {})
    null_values = {k: set(v) for k, v in (null_values or {}).items()}
    state: dict[Any, dict[str, Any]] = {}
    for _, frame in sorted(batches, key=lambda b: b[0]):
        columns = [c for c in frame.columns if c != key]
        for row in frame.itertuples(index=False):
            values = row._asdict()
            current = state.setdefault(values[key], {})
            for col in columns:
                value = values[col]
                op = operators.get(col, "last")
                missing = value is None or (isinstance(value, float) and pd.isna(value))
                if op == "sum":
                    if not missing:
                        current[col] = current.get(col, 0) + value
                elif op in ("max", "min"):
                    if not missing:
                        old = current.get(col)
                        current[col] = value if old is None else (max if op == "max" else min)(old, value)
                elif op == "last_non_null":
                    good = not missing and value not in null_values.get(col, set())
                    if good or not current.get(f"__good_{col}", False):
                        current[col] = value
                        current[f"__good_{col}"] = good
                else:
                    current[col] = value
    names = sorted({c for v in state.values() for c in v if not c.startswith("__good_")})
    rows = [{key: k, **{c: v.get(c) for c in names}} for k, v in state.items()]
    out = pd.DataFrame(rows, columns=[key, *names]).sort_values(key).reset_index(drop=True)
    return out.astype(object).where(out.notna(), None).astype(str)


def merge_with_deletes(events: Sequence[tuple[int, pd.DataFrame]], key: str, columns: Sequence[str], *,
                       operators: Mapping[str, str] | None = None,
                       null_values: Mapping[str, Sequence[str]] | None = None,
                       marker: str = "_delete") -> pd.DataFrame:
    """The table after `events` (version, frame) in any order, by the definition of versioned deletes: a row
    whose `marker` is true deletes its key at its version; a key's deletes remove every row of that key with a
    version at or below the highest of them (a delete wins within its version); what is left merges as
    `merge`. A frame of only the key column and a true marker is a delete operation. `columns`: the value
    columns (every one in the result, NULL where nothing is left)."""
    watermark: dict[Any, int] = {}
    for version, frame in events:
        if marker in frame.columns:
            for k in frame.loc[frame[marker].fillna(False).astype(bool), key]:
                watermark[k] = max(watermark.get(k, version), version)
    kept = []
    for version, frame in events:
        rows = frame if marker not in frame.columns else frame.loc[~frame[marker].fillna(False).astype(bool)]
        rows = rows.drop(columns=[marker], errors="ignore")
        rows = rows.loc[[version > watermark.get(k, version - 1) for k in rows[key]]]
        if len(rows):
            kept.append((version, rows))
    if not kept:
        return pd.DataFrame(columns=[key, *columns]).astype(str)
    out = merge(kept, key=key, operators=operators, null_values=null_values)
    for col in columns:
        if col not in out.columns:
            out[col] = "None"
    return out[[key, *columns]]


def bdci_expected(paths: Sequence[Path], versions: Sequence[int] | None = None) -> pd.DataFrame:
    """The BDCI merge of the files (file i is version i) restricted to `versions`."""
    chosen = range(len(paths)) if versions is None else versions
    return merge([(v, pd.read_parquet(paths[v])) for v in chosen], operators=bdci.MERGE_OPERATORS,
                 null_values=bdci.NULL_VALUES)


def as_strings(df: pd.DataFrame, key: str = "uuid", columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A Spark result in the oracle's form."""
    out = df[[key, *(columns or [c for c in df.columns if c != key])]].sort_values(key).reset_index(drop=True)
    return out.astype(object).where(out.notna(), None).astype(str)
