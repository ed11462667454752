"""``pretty_json``: a value shown as indented JSON, once.

Tool arguments and framework payloads often arrive as JSON text inside JSON; showing that text as
it is stored reads as escaped quotes (``"{\\"amount\\": 649}"``). A string that is itself a JSON
object or array is decoded first, so the page shows the structure, not its encoding.
"""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


def decoded(value: Any) -> Any:
    """``value`` with JSON text that encodes an object or array replaced by what it encodes."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return decoded(json.loads(value))
        except ValueError:
            return value
    if isinstance(value, dict):
        return {k: decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decoded(v) for v in value]
    return value


@register.filter
def pretty_json(value: Any) -> str:
    value = decoded(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def is_json_structure(value: Any) -> bool:
    """Whether ``value`` is (or is JSON text of) an object or array: shown as ``pretty_json``."""
    return isinstance(decoded(value), dict | list)
