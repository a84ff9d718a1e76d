"""How the files of one partition are bucketed: columns, count, hash — recorded with every bucketed file.

A table's bucket spec may change (turned on from a partition on, a hot partition given more buckets, a
rewrite to other columns), so a file carries the bucketing it was written with, as a short text key
(`murmur3:16:work_id,dt`). A read is a bucketed scan only where all the files it reads share one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from airflow_lake.lake.errors import LakeError, LakeSpecError

MURMUR3 = "murmur3"  # Spark's `hash()`: what Spark reads as a bucketed table
HASHES = (MURMUR3,)


@dataclass(frozen=True)
class Bucketing:
    """Rows go to bucket `pmod(hash(columns), count)`; one file per bucket and partition."""

    columns: tuple[str, ...]
    count: int
    hash: str = MURMUR3

    def key(self) -> str:
        """The text a file records, e.g. 'murmur3:16:work_id'."""
        return f"{self.hash}:{self.count}:{','.join(self.columns)}"

    @classmethod
    def parse(cls, key: str) -> Bucketing:
        """Inverse of `key`."""
        try:
            hash_name, count, columns = key.split(":", 2)
            return cls(tuple(columns.split(",")), int(count), hash_name)
        except ValueError as err:
            raise LakeError(f"damaged bucketing {key!r} in the table's metadata.") from err


def check_multiples(counts: Iterable[int], field: str) -> None:
    """Refuse bucket counts of one table that are not multiples of each other (8 and 16: yes; 8 and 12: no)."""
    ordered = sorted(set(counts))
    for small, big in itertools.pairwise(ordered):
        if big % small:
            raise LakeSpecError(field, f"bucket counts {small} and {big} are not multiples of each other.",
                                "Use counts that divide each other, best powers of two (8, 16, 32), so that "
                                "joins across them keep their buckets.")

