"""The API's JSON parser: refuses, at the edge, what no field of ours can store.

* nesting deeper than MAX_DEPTH (a 10,000-deep document would exhaust the decoder's recursion);
* NUL characters (PostgreSQL text and jsonb cannot hold them) and lone surrogates (not valid
  UTF-8), in keys as in values;
* integers outside the signed 64-bit range (no column holds them; SQLite cannot bind them) and
  numbers that overflow to infinity (``1e400``).

Each is a 400 ``malformed_json`` / ``invalid_text`` / ``invalid_number`` naming the JSON path,
before any view runs — so nothing is written. Narrower ranges (32-bit columns, minutes, budgets)
are the fields' business (:mod:`memoryhub.api.fields`).
"""

from __future__ import annotations

import math
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from memoryhub.errors import InvalidInput

MAX_DEPTH = 64
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text (None when it can)."""
    if "\x00" in value:
        return "contains a NUL character (\\u0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid UTF-8)"
    return None


def _path(parts: list[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def check_document(data: Any, max_depth: int = MAX_DEPTH) -> None:
    """Raise InvalidInput for the first value no field can store (iterative: no recursion)."""
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    while stack:
        value, where = stack.pop()
        if len(where) > max_depth:
            raise InvalidInput(
                f"JSON nested deeper than {max_depth} levels at {_path(where[:8])}…", code="too_deep"
            )
        if isinstance(value, str):
            problem = text_problem(value)
            if problem:
                raise InvalidInput(f"{_path(where)}: {problem}", code="invalid_text", field=_path(where))
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise InvalidInput(
                    f"{_path(where)}: integer outside the 64-bit range",
                    code="invalid_number",
                    field=_path(where),
                )
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidInput(
                    f"{_path(where)}: number is not finite", code="invalid_number", field=_path(where)
                )
        elif isinstance(value, dict):
            for key, item in value.items():
                problem = text_problem(key)
                if problem:
                    raise InvalidInput(
                        f"{_path(where)}: a key {problem}", code="invalid_text", field=_path(where)
                    )
                stack.append((item, [*where, key]))
        elif isinstance(value, list):
            stack.extend((item, [*where, i]) for i, item in enumerate(value))


class SafeJSONParser(JSONParser):
    """DRF's JSONParser plus :func:`check_document` (strict JSON: no NaN/Infinity literals)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON nested too deeply (more than {MAX_DEPTH} levels)")
        check_document(data)
        return data
