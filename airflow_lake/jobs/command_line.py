"""Command line of the runner: `<runner> OPERATION --spec JSON|@file`, as spark-submit runs it.

The spec is validated before any SparkSession starts. The job tells its outcome by the lines and exit
codes of `airflow_lake.jobs.protocol`: its STARTED line first, its RESULT or FAILED line (then one line
saying what went wrong) last.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import traceback
from collections.abc import Sequence
from typing import Any

from airflow_lake.jobs import registry
from airflow_lake.jobs.noop import NothingToDo
from airflow_lake.jobs.protocol import Ending, classify, job_nonce, write_started
from airflow_lake.lake.errors import LakeError, LakeSpecError
from airflow_lake.lake.spec.strict import loads_spec


def load_spec(text: str) -> Any:
    """Parse `--spec`: inline JSON, or @path to a JSON file."""
    try:
        if text.startswith("@"):
            with open(text[1:], encoding="utf-8") as handle:
                return loads_spec(handle.read())
        return loads_spec(text)
    except LakeSpecError:  # a key given twice: it names the key
        raise
    except (OSError, ValueError) as err:
        raise LakeSpecError("--spec", f"cannot read the spec: {err}.", "Pass a JSON object or @file.json.") from err
    except RecursionError as err:
        raise LakeSpecError("--spec", "the JSON is nested too deeply to read.",
                            "Pass a spec as the operation documents it (docs/specs.md).") from err


def main(argv: Sequence[str] | None = None) -> int:
    """Run one operation from the command line; returns the exit code.

    The last line printed is always the outcome: the result line, or one line saying what went wrong
    (after Spark has stopped, so nothing Spark or py4j logs on the way out comes after it).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines at exit would follow our last line
    parser = argparse.ArgumentParser(prog="airflow-lake-job", description="Run one airflow-lake operation.")
    parser.add_argument("operation", help=f"one of {', '.join(sorted(registry.operations()))}")
    parser.add_argument("--spec", required=True, help="JSON object, or @file.json")
    args = parser.parse_args(argv)
    spark: Any = None
    nonce = job_nonce()
    write_started(nonce)
    try:
        op = registry.get(args.operation)
        spec = load_spec(args.spec)
        parsed = registry.parse_spec(op, spec)  # before Spark starts
        if op.needs_spark and not isinstance(parsed, NothingToDo):
            from airflow_lake.jobs.session import build_session

            spark = build_session(f"airflow-lake {args.operation} {spec.get('table', '')}")
        from airflow_lake.jobs.runner import run

        ending = Ending.of(run(spark, args.operation, spec), nonce)
    except Exception as err:
        if not isinstance(err, LakeError):  # the traceback for whoever debugs it
            traceback.print_exc()
        ending = Ending.of(classify(err), nonce)
    if spark is not None:
        with contextlib.suppress(Exception):
            spark.stop()
    return ending.write()
