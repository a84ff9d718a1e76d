"""Iceberg's `replace` snapshot (files rewritten, the same rows: what clustering and bucket rewrites do), which
pyiceberg (0.12) has no producer for: its overwrite producer with the operation set to `replace`.

pyiceberg's snapshot summary builder refuses `replace` (it knows how to total append, overwrite and delete only), so
the summary is built as an overwrite's (the same totals: files and rows removed and added) and then named `replace`.
This leans on pyiceberg's private producer classes; a test pins it (tests/lake/publish/test_iceberg_publish.py).
"""

from __future__ import annotations

from typing import Any

from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update.snapshot import UpdateSnapshot, _OverwriteFiles


class _ReplaceFiles(_OverwriteFiles):
    def _summary(self, snapshot_properties: dict[str, str] = {}) -> Summary:  # noqa: B006 - pyiceberg's signature
        self._operation = Operation.OVERWRITE
        try:
            summary = super()._summary(snapshot_properties)
        finally:
            self._operation = Operation.REPLACE
        return Summary(Operation.REPLACE, **summary.additional_properties)


def replace_files(update: UpdateSnapshot) -> Any:
    """A `replace` snapshot producer of `update` (delete_data_file / append_data_file / commit)."""
    return _ReplaceFiles(operation=Operation.REPLACE, transaction=update._transaction, io=update._io,
                         branch=update._branch, snapshot_properties=update._snapshot_properties)
