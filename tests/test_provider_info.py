"""Provider metadata: valid against Airflow's schema and listed by `airflow providers list`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import airflow
import jsonschema

from airflow_lake import __version__
from airflow_lake.provider_info import get_provider_info


def test_provider_info_matches_airflows_schema() -> None:
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    for group in ("hooks", "operators"):
        for module in (m for item in info[group] for m in item["python-modules"]):
            __import__(module)


def test_airflow_providers_list_shows_the_package() -> None:
    airflow_bin = str(Path(sys.executable).with_name("airflow"))
    result = subprocess.run([airflow_bin, "providers", "list", "-o", "json"], capture_output=True, text=True,
                            timeout=180, env=os.environ.copy(), check=True)
    start = result.stdout.index("[")
    providers = {p["package_name"]: p for p in json.loads(result.stdout[start:])}
    assert providers["airflow-lake"]["version"] == __version__
