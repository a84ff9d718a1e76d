"""Command line of the runner: `<runner> OPERATION --spec JSON|@file`, as spark-submit runs it.

The spec is validated before any SparkSession starts. The last line printed on success is
`AIRFLOW_LAKE_RESULT <json metrics>`; on failure the last lines say what went wrong and the exit
code tells how: 2 bad spec or data (fix and rerun), 3 commit conflict (retry), 1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import traceback
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
    try:
        op = registry.get(args.operation)
        spec = load_spec(args.spec)
        op.parse(spec)  # before Spark starts
        if op.needs_spark:
            from airflow_lake.jobs.session import build_session

            spark = build_session(f"airflow-lake {args.operation} {spec.get('table', '')}")
        from airflow_lake.jobs.runner import run

        metrics = run(spark, args.operation, spec)
        code, line = 0, RESULT_PREFIX + json.dumps(metrics, default=str)
    except (LakeSpecError, LakeSchemaError) as err:
        code, line = EXIT_BAD_INPUT, f"airflow-lake: {type(err).__name__}: {err}"
    except LakeCommitConflict as err:
        code, line = EXIT_CONFLICT, f"airflow-lake: {type(err).__name__} (retryable): {err}"
    except LakeError as err:
        code, line = EXIT_FAILED, f"airflow-lake: {type(err).__name__}: {err}"
    except Exception as err:  # the traceback for whoever debugs it, then the one line that says what failed
        traceback.print_exc()
        code = EXIT_BAD_INPUT if _is_query_error(err) else EXIT_FAILED
        line = f"airflow-lake: {type(err).__name__}: {_first_line(err)}"
    if spark is not None:
        with contextlib.suppress(Exception):
            spark.stop()
    print(line, file=sys.stdout if code == 0 else sys.stderr, flush=True)
    return code


def _is_query_error(err: BaseException) -> bool:
    """Spark refused the user's SQL (unknown table or column, a syntax error): a user error, exit 2."""
    try:
        from pyspark.errors import AnalysisException
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return False
    return isinstance(err, AnalysisException)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else repr(err)
