"""Command line of the runner: `<runner> OPERATION --spec JSON|@file`, as spark-submit runs it.

The spec is validated before any SparkSession starts. The last line printed on success is
`AIRFLOW_LAKE_RESULT <json metrics>`; on failure the last lines say what went wrong and the exit
code tells how: 2 bad spec or data (fix and rerun), 3 commit conflict (retry), 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from airflow_lake.jobs import registry
from airflow_lake.lake.errors import LakeCommitConflict, LakeError, LakeSchemaError, LakeSpecError

RESULT_PREFIX = "AIRFLOW_LAKE_RESULT "
EXIT_BAD_INPUT, EXIT_CONFLICT, EXIT_FAILED = 2, 3, 1


def load_spec(text: str) -> Any:
    """Parse `--spec`: inline JSON, or @path to a JSON file."""
    try:
        if text.startswith("@"):
            with open(text[1:], encoding="utf-8") as handle:
                return json.load(handle)
        return json.loads(text)
    except (OSError, ValueError) as err:
        raise LakeSpecError("--spec", f"cannot read the spec: {err}.", "Pass a JSON object or @file.json.") from err


def main(argv: Sequence[str] | None = None) -> int:
    """Run one operation from the command line; returns the exit code."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="airflow-lake-job", description="Run one airflow-lake operation.")
    parser.add_argument("operation", help=f"one of {', '.join(sorted(registry.operations()))}")
    parser.add_argument("--spec", required=True, help="JSON object, or @file.json")
    args = parser.parse_args(argv)
    try:
        op = registry.get(args.operation)
        spec = load_spec(args.spec)
        op.parse(spec)  # before Spark starts
        spark = None
        if op.needs_spark:
            from airflow_lake.jobs.session import build_session

            spark = build_session(f"airflow-lake {args.operation} {spec.get('table', '')}")
        from airflow_lake.jobs.runner import run

        metrics = run(spark, args.operation, spec)
    except (LakeSpecError, LakeSchemaError) as err:
        print(f"airflow-lake: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    except LakeCommitConflict as err:
        print(f"airflow-lake: {type(err).__name__} (retryable): {err}", file=sys.stderr, flush=True)
        return EXIT_CONFLICT
    except LakeError as err:
        print(f"airflow-lake: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    print(RESULT_PREFIX + json.dumps(metrics, default=str), flush=True)
    return 0
