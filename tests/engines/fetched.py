"""What the foreign-engine tests need from a fetch script of `.ci/` (jars, a Trino server): run it once per process,
and skip a test without it, or fail it under CI=true (CI fetches them: a skip would hide a broken fetch)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STDERR_TAIL = 4000


def run_fetch(script: Path, timeout: float) -> tuple[Path | None, str]:
    """(the directory the script printed last, "") once it succeeded; (None, why) if it could not."""
    try:
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=timeout, check=False,
                              cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f".ci/{script.name} did not finish: {err}"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return None, f".ci/{script.name} failed ({done.returncode}): {done.stderr[-STDERR_TAIL:]}"
    return Path(lines[-1]), ""


def require(found: Path | None, why: str, what: str) -> Path:
    """`found`; else skip the test, or fail it under CI=true, saying `what` cannot run and why."""
    if found is None:
        message = f"{what} cannot run: {why}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found
