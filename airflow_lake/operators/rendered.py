"""Values as templates and upstream tasks give them to operators: numbers rendered as text, selections
rendered as text or empty. Plain Python: the sensor uses it too."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

_WHOLE = re.compile(r"-?[0-9]+(?:\.0*)?")


def rendered_whole(value: Any) -> Any:
    """A number from a template as an int where it is whole: "8", "8.0" and 8.0 become 8 (a Param of type
    integer takes 8.0, as JSON Schema counts it an integer, and `{{ params.n }}` renders it "8.0").
    Anything else is returned as it is, for the operation's spec check to name."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if len(text) <= 4000 and _WHOLE.fullmatch(text):  # int() refuses longer digit strings outright
            return int(text.split(".", 1)[0])
    return value


def rendered_bucket(bucket: Any) -> Any:
    """A bucket spec whose counts came from templates ("16", "16.0") with the counts as numbers."""
    if not isinstance(bucket, Mapping):
        return bucket
    out = {k: rendered_whole(v) if k == "count" else v for k, v in bucket.items()}
    if isinstance(out.get("partition_counts"), list):
        out["partition_counts"] = [{k: rendered_whole(v) if k == "count" else v for k, v in item.items()}
                                   if isinstance(item, Mapping) else item for item in out["partition_counts"]]
    return out


def rendered_selection(value: Any, name: str, *, given: bool) -> Any:
    """A selection (a list of partitions or instants, a range) as a template or an upstream task gave it.

    Text a template rendered is read back ("[]", "[{'dt': '2024-01-01'}]"). A parameter `given` at
    construction (a template, an XComArg) that came out empty (None, "", "None") is an empty list:
    nothing selected — never the "everything" that leaving the parameter out means."""
    if isinstance(value, str):
        text = value.strip()
        if text in ("", "None", "null"):
            value = None
        elif text[:1] in "[{":
            try:
                value = json.loads(text)
            except ValueError:
                try:
                    value = ast.literal_eval(text)  # a Python repr, as Jinja renders a list
                except (ValueError, SyntaxError, MemoryError, RecursionError) as err:
                    raise ValueError(f"{name} must be a list (or a JSON / Python list as text), got {value!r}"
                                     ) from err
    if value is None and given:
        return []
    return value
