"""Provider metadata for Airflow's providers manager (entry point `apache_airflow_provider`)."""

from __future__ import annotations

from typing import Any

from airflow_lake import __version__


def get_provider_info() -> dict[str, Any]:
    """What `airflow providers list` shows, and where Airflow finds our hooks and operators."""
    return {
        "package-name": "airflow-lake",
        "name": "Airflow Lake",
        "description": "Spark lake tables kept fast and cheap: clustering, buckets, versioned upserts on Parquet.",
        "versions": [__version__],
        "integrations": [
            {"integration-name": "Airflow Lake", "external-doc-url": "https://pypi.org/project/airflow-lake/",
             "tags": ["apache"]},
        ],
        "hooks": [{"integration-name": "Airflow Lake", "python-modules": ["airflow_lake.hooks.lake"]}],
        "operators": [
            {"integration-name": "Airflow Lake",
             "python-modules": ["airflow_lake.operators.write", "airflow_lake.operators.create_table",
                                "airflow_lake.operators.maintenance", "airflow_lake.operators.bucket_rewrite",
                                "airflow_lake.operators.clustering", "airflow_lake.operators.upsert",
                                "airflow_lake.operators.compact_upserts", "airflow_lake.operators.alter_table",
                                "airflow_lake.operators.restore", "airflow_lake.operators.publish"]},
        ],
        "sensors": [{"integration-name": "Airflow Lake", "python-modules": ["airflow_lake.sensors.commit_count"]}],
        "triggers": [{"integration-name": "Airflow Lake", "python-modules": ["airflow_lake.triggers.commit_count"]}],
        "extra-links": ["airflow_lake.ui.links.LakeTableLink"],
        "plugins": [{"name": "airflow_lake", "plugin-class": "airflow_lake.ui.plugin.LakePlugin"}],
    }
