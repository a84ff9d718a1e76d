"""Where a table is published as Iceberg: the pyiceberg catalog named by the table property `publish.iceberg.catalog`
(configured the way pyiceberg configures catalogs: `~/.pyiceberg.yaml` or `PYICEBERG_CATALOG__<NAME>__*`
environment variables; SQL, REST, Glue and Hive catalogs alike), under the identifier `publish.iceberg.table`.

The Iceberg table is created on the first publish and marked as ours (`lake.table-id`): a table of that name that
another lake table or another writer made is refused, never written. It is created with
- `gc.enabled=false`: Iceberg's snapshot expiry and orphan removal (Spark's procedures, other engines) would delete
  data files our log still holds (the files an Iceberg snapshot drops may still be in our earlier snapshots, and a
  primary-key table's delta files are in none of Iceberg's); with it off they refuse to delete files;
- `commit.retry.num-retries=0`: pyiceberg (0.12) retries a failed commit by re-applying its snapshot on the newer
  head, which would publish an entry twice when two publishers race; we reload and go on from the newest `lake.seq`
  instead;
- `commit.manifest-merge.enabled=true`: appends merge small manifests (pyiceberg leaves them apart by default), so a
  table appended to at every commit keeps few manifests for readers to open.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any, cast

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
from pyiceberg.utils.config import Config

from airflow_lake.lake.errors import LakeError
from airflow_lake.lake.publish import iceberg_schema

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from airflow_lake.lake.spec.table_spec import TableSpec

TABLE_ID = "lake.table-id"  # the identity (`TableMetadata.identity`) of the lake table it publishes
TABLE_URL = "lake.table-url"  # where that table is (for people)
OWN_PROPERTIES = {"gc.enabled": "false", "commit.retry.num-retries": "0", "commit.manifest-merge.enabled": "true"}
_catalogs: dict[tuple[str, str], Catalog] = {}
_lock = threading.Lock()


def catalog(name: str) -> Catalog:
    """The pyiceberg catalog `name`, as pyiceberg's configuration says now (read again each time, so a changed
    `~/.pyiceberg.yaml` or environment applies; one catalog object per configuration)."""
    config = Config().get_catalog_config(name)
    if not config:
        raise LakeError(f"no pyiceberg catalog {name!r} is configured (publish.iceberg.catalog). Fix: configure it "
                        f"in ~/.pyiceberg.yaml (catalog: {name}: ...) or with environment variables "
                        f"PYICEBERG_CATALOG__{name.upper().replace('-', '_')}__URI=... (pyiceberg's configuration), or "
                        "unset publish.iceberg.catalog.")
    key = (name.lower(), repr(sorted(config.items())))
    with _lock:
        found = _catalogs.get(key)
        if found is None:
            found = _catalogs[key] = load_catalog(name, **cast("dict[str, Any]", config))
        return found


def identifier(text: str) -> tuple[str, ...]:
    """`namespace.table` as the catalog's identifier tuple."""
    return tuple(text.split("."))


def load(cat: Catalog, name: str) -> Table | None:
    """The published table, or None when it does not exist yet."""
    try:
        return cat.load_table(identifier(name))
    except NoSuchTableError:
        return None


def check_owner(table: Table, name: str, identity: str) -> None:
    """Refuse an Iceberg table that does not publish this lake table."""
    owner = table.metadata.properties.get(TABLE_ID)
    if owner != identity:
        whose = f"the lake table {table.metadata.properties.get(TABLE_URL)!r}" if owner else \
            "another writer (it has no lake.table-id)"
        raise LakeError(f"the Iceberg table {name!r} belongs to {whose}, not to this one; nothing is published to "
                        "it. Fix: set publish.iceberg.table to a name of its own (or drop that Iceberg table if it "
                        "is a leftover).")


def create(cat: Catalog, name: str, spec: TableSpec, identity: str, url: str) -> Table:
    """Create the published table (its namespace too), empty, with `spec`'s schema and partitions; when another
    publisher created it first, that one."""
    ident = identifier(name)
    namespace = ident[:-1]
    # some catalogs cannot create namespaces (a REST catalog with fixed ones): the table's create then says why
    with contextlib.suppress(Exception):
        cat.create_namespace_if_not_exists(namespace)
    schema = iceberg_schema.schema(spec)
    properties = {TABLE_ID: identity, TABLE_URL: url, **OWN_PROPERTIES}
    try:
        table = cat.create_table(ident, schema, partition_spec=iceberg_schema.partition_spec(spec, schema),
                                 properties=properties)
    except TableAlreadyExistsError:
        table = cat.load_table(ident)
    check_owner(table, name, identity)
    return table
