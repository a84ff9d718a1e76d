"""Lineage: what a lake operator read and wrote, as OpenLineage datasets.

`naming` names a table or source path the way the OpenLineage naming spec does (`file` + absolute path,
`s3://bucket` + key, ...); `datasets` decides, from the operator's rendered fields, the metrics it returned (XCom)
and table metadata only, which datasets a task read and wrote, with their schemas, the commit and its statistics;
`facets` turns that into the OpenLineage provider's `OperatorLineage` (imported only there: the operators call it
from `get_openlineage_facets_on_complete`, so neither DAG parsing nor a worker without the provider loads it).

Nothing here starts Spark: it runs in the Airflow worker after the task, on the table's log.
"""

from __future__ import annotations
