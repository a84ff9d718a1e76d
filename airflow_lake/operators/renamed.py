"""Operators renamed in issue 21 (docs/api.md, "Names"): each old class is a subclass of its new one that warns
when a DAG builds it, so DAG files written before the rename keep working."""

from __future__ import annotations

import warnings

from airflow.exceptions import AirflowProviderDeprecationWarning


def warn_renamed(old: type, new: type) -> None:
    """Warn that operator class `old` is deprecated in favour of `new` (called from `old.__init__`)."""
    # stacklevel 4: past this helper, the old class's __init__ and Airflow's apply_defaults wrapper, so the
    # warning names the DAG file's line
    warnings.warn(f"{old.__name__} is deprecated: use {new.__name__} from {new.__module__} (same parameters, "
                  "same operation).", AirflowProviderDeprecationWarning, stacklevel=4)
