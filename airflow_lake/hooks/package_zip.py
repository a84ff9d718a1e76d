"""A zip of the airflow_lake package for `--py-files`, so cluster executors import the same code."""

from __future__ import annotations

import hashlib
import tempfile
import zipfile
from pathlib import Path

import airflow_lake

PACKAGE_DIR = Path(airflow_lake.__file__).parent


def package_zip() -> str:
    """Path of a zip of the installed package, rebuilt when its sources change."""
    sources = sorted(p for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in sources:
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
    target = Path(tempfile.gettempdir()) / f"airflow_lake-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        tmp = target.with_suffix(f".{id(sources)}.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sources:
                archive.write(path, Path("airflow_lake") / path.relative_to(PACKAGE_DIR))
            archive.write(PACKAGE_DIR / "py.typed", "airflow_lake/py.typed")
        tmp.replace(target)
    return str(target)
