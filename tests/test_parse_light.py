"""DAG files parse light: what a DAG file imports at every parse loads no pyarrow, numpy, pandas, pyspark or py4j
beyond what Airflow itself loads. The dag-processor parses each DAG file every 30 s by default, so each check runs
in a fresh interpreter, as a parse does, and a failure names who imported the heavy module.

`benchmarks/bench_parse.py` times the same probes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DAG_FILES = sorted((ROOT / "dags").glob("*.py"))
HEAVY = ("pyarrow", "numpy", "pandas", "pyspark", "py4j")
MARKER = "PARSE_PROBE "

# Runs in the child. The tracing is installed before anything else is imported, so it also sees what Airflow loads:
# a meta-path finder that only observes (it finds nothing) records the import stack when a heavy top-level name is
# first imported, and a wrapped __import__ records every line of airflow_lake or a DAG file that imports one, even
# when it was already loaded by someone else (the first chain alone hides the second importer).
PROBE = r"""
import builtins, importlib, json, os, sys, time

spec = json.loads(sys.argv[1])
heavy = set(spec["heavy"])
chains = {}
importers = set()


def ours(frame):
    # Airflow loads a DAG file as a module named unusual_prefix_<sha1>_<file stem>
    return frame.f_globals.get("__name__", "").startswith(("airflow_lake", "unusual_prefix_"))


def where(frame):
    name = frame.f_globals.get("__name__", "?")
    if name.startswith("unusual_prefix_"):
        name = os.path.basename(frame.f_code.co_filename)
    place = f"{name}:{frame.f_lineno}"
    return place if frame.f_code.co_name == "<module>" else f"{place} ({frame.f_code.co_name})"


def skipped(frame):
    filename = frame.f_code.co_filename
    return filename.startswith("<frozen") or filename == "<string>" or filename.endswith("importlib/__init__.py")


def chain(frame):
    # the modules being executed, outermost first, plus the function that imports if it is not module level
    out, direct = [], True
    while frame is not None:
        if not skipped(frame):
            if direct or frame.f_code.co_name == "<module>" or ours(frame):
                out.append(where(frame))
            direct = False
        frame = frame.f_back
    return out[::-1]


class Watch:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in heavy and top not in chains:
            chains[top] = [*chain(sys._getframe(1)), name]
        return None


real_import = builtins.__import__


def traced_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name.partition(".")[0] in heavy:
        frame = sys._getframe(1)
        if ours(frame):
            importers.add(f"{where(frame)} imports {name}")
    return real_import(name, globals, locals, fromlist, level)


if spec["trace"]:
    sys.meta_path.insert(0, Watch())
    builtins.__import__ = traced_import

dag_file = spec["dag_file"]
if dag_file:
    # what the dag-processor has loaded before it parses a file: the bag, the serializer, and the airflow.* modules
    # the file imports (core.parsing_pre_import_modules, on by default)
    from airflow.dag_processing.dagbag import BundleDagBag
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.file import iter_airflow_imports

    for module in iter_airflow_imports(dag_file):
        importlib.import_module(module)

dag_ids, import_errors = [], {}
started = time.perf_counter()
for module in spec["imports"]:
    try:
        importlib.import_module(module)
    except Exception:  # reported like DagBag's import errors, so the heavy modules loaded so far are still named
        import traceback
        import_errors[module] = traceback.format_exc(limit=-8)
if dag_file:
    # as airflow.dag_processing.processor._parse_file: the bag of one file, then each DAG serialized
    bag = BundleDagBag(dag_folder=dag_file, bundle_path=os.path.dirname(dag_file), bundle_name="parse-light",
                       load_op_links=False)
    for dag in bag.dags.values():
        DagSerialization.to_dict(dag)
    dag_ids = sorted(bag.dags)
    import_errors.update({str(k): str(v) for k, v in bag.import_errors.items()})
seconds = time.perf_counter() - started

print("PARSE_PROBE " + json.dumps({
    "seconds": seconds, "heavy": sorted(heavy & set(sys.modules)), "chains": chains,
    "importers": sorted(importers), "dag_ids": dag_ids, "import_errors": import_errors,
}), flush=True)
"""


@dataclass(frozen=True)
class Probe:
    """What one fresh interpreter loaded: the timed step, the heavy modules left in sys.modules, who imported them."""

    seconds: float  # the imports / the parse, timed inside the child
    wall_seconds: float  # the whole child process, interpreter start included
    heavy: list[str]
    chains: dict[str, list[str]]  # heavy top-level name -> the import stack when it was first loaded
    importers: list[str]  # airflow_lake / DAG file lines that import a heavy module
    dag_ids: list[str]
    import_errors: dict[str, str]


def airflow_env(home: Path) -> dict[str, str]:
    """The environment the tests give Airflow, with a private AIRFLOW_HOME (never ~/airflow)."""
    return {**os.environ, "AIRFLOW_HOME": str(home / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"), "AIRFLOW_LAKE_ROOT": str(home / "lake"),
            "AIRFLOW_LAKE_LANDING": str(home / "landing"),
            "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]"}',
            "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def package_modules(package: str, root: Path = ROOT) -> list[str]:
    """The public modules of `package` and its subpackages, found on disk (importing them is what is measured)."""
    names = []
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            names.append(".".join(parts))
    return names


def parse_time_modules() -> list[str]:
    """Every module a DAG file may touch at parse: the operators, sensors, triggers, assets and the lake hook."""
    return [*package_modules("airflow_lake.operators"), *package_modules("airflow_lake.sensors"),
            *package_modules("airflow_lake.triggers"), "airflow_lake.assets", "airflow_lake.hooks.lake"]


def trivial_dag_file(directory: Path) -> Path:
    """A DAG file that imports only airflow.sdk: one DAG, one task."""
    path = directory / "parse_light_baseline.py"
    path.write_text(
        "from __future__ import annotations\n\n"
        "import datetime as dt\n\n"
        "from airflow.sdk import DAG, task\n\n"
        'with DAG(dag_id="parse_light_baseline", schedule=None, start_date=dt.datetime(2024, 1, 1, tzinfo=dt.UTC)):\n'
        "    @task\n"
        "    def noop() -> None:\n"
        "        pass\n\n"
        "    noop()\n"
    )
    return path


def run_probe(home: Path, *, imports: Sequence[str] = (), dag_file: Path | None = None, trace: bool = True,
              python: str = sys.executable, timeout: float = 300, root: Path = ROOT) -> Probe:
    """Import `imports`, then parse `dag_file` with Airflow's DagBag, in a fresh interpreter; `trace` records who
    imported each heavy module (it slows imports a little: off when timing). `root`: the checkout to import
    airflow_lake from (another one measures an older version, as benchmarks/bench_parse.py --before does)."""
    spec = {"heavy": HEAVY, "imports": list(imports), "dag_file": str(dag_file) if dag_file else None, "trace": trace}
    started = time.perf_counter()
    env = airflow_env(home)
    if root != ROOT:
        env.update(PYTHONPATH=str(root), AIRFLOW__CORE__DAGS_FOLDER=str(root / "dags"))
    result = subprocess.run([python, "-c", PROBE, json.dumps(spec)], env=env, cwd=root,
                            capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.perf_counter() - started
    lines = [line for line in result.stdout.splitlines() if line.startswith(MARKER)]
    if result.returncode != 0 or not lines:
        raise AssertionError(f"probe {spec} exited with {result.returncode}:\n{result.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(lines[-1][len(MARKER):])
    return Probe(seconds=float(out["seconds"]), wall_seconds=wall, heavy=list(out["heavy"]),
                 chains=dict(out["chains"]), importers=list(out["importers"]), dag_ids=list(out["dag_ids"]),
                 import_errors=dict(out["import_errors"]))


def explain(what: str, probe: Probe, allowed: set[str]) -> str:
    """The heavy modules `probe` loaded beyond `allowed`, each with the import chain that first loaded it."""
    extra = [name for name in probe.heavy if name not in allowed]
    lines = [f"{what} loaded {', '.join(extra) or 'no heavy module'} (Airflow itself loads "
             f"{', '.join(sorted(allowed)) or 'none'}):"]
    lines += [f"  {name}: {' -> '.join(probe.chains.get(name, ['?']))}" for name in extra]
    if probe.importers:
        lines += ["lines of airflow_lake / the DAG file that import a heavy module:"]
        lines += [f"  {line}" for line in probe.importers]
    return "\n".join(lines)


def failed_imports(probe: Probe) -> str:
    """The probe's import errors, each with its traceback."""
    return "\n".join(f"{name} failed to import:\n{error}" for name, error in probe.import_errors.items())


@pytest.fixture(scope="module")
def airflow_heavy(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The heavy modules Airflow itself loads to parse a DAG file that imports only airflow.sdk."""
    home = tmp_path_factory.mktemp("parse-light-airflow")
    probe = run_probe(home, imports=["airflow.sdk"], dag_file=trivial_dag_file(home))
    assert probe.dag_ids == ["parse_light_baseline"], probe.import_errors
    return set(probe.heavy)


def test_operator_sensor_trigger_and_hook_modules_import_light(tmp_path: Path, airflow_heavy: set[str]) -> None:
    modules = parse_time_modules()  # airflow_lake.operators first: what every DAG file imports
    probe = run_probe(tmp_path, imports=modules)
    what = f"importing {len(modules)} modules"
    assert not probe.import_errors, f"{failed_imports(probe)}\n{explain(what, probe, airflow_heavy)}"
    assert set(probe.heavy) <= airflow_heavy, explain(what, probe, airflow_heavy)


@pytest.mark.parametrize("dag_file", DAG_FILES, ids=[path.name for path in DAG_FILES])
def test_example_dag_file_parses_light(dag_file: Path, tmp_path: Path, airflow_heavy: set[str]) -> None:
    probe = run_probe(tmp_path, dag_file=dag_file)
    what = f"parsing dags/{dag_file.name}"
    assert probe.dag_ids and not probe.import_errors, f"{failed_imports(probe)}\n{explain(what, probe, airflow_heavy)}"
    assert set(probe.heavy) <= airflow_heavy, explain(what, probe, airflow_heavy)
