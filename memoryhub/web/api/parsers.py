"""The API's JSON parser: refuses, at the edge, what no field of ours can store.

* nesting deeper than MAX_DEPTH (a 10,000-deep document would exhaust the decoder's recursion);
* NUL characters (PostgreSQL text and jsonb cannot hold them) and lone surrogates (not valid
  UTF-8), in keys as in values;
* integers outside the signed 64-bit range (no column holds them; SQLite cannot bind them) and
  numbers that overflow to infinity (``1e400``).

Each is a 400 ``malformed_json`` / ``invalid_text`` / ``invalid_number`` naming the JSON path,
before any view runs — so nothing is written. Narrower ranges (32-bit columns, minutes, budgets)
are the fields' business (:mod:`memoryhub.web.api.fields`).
"""

from __future__ import annotations

import codecs
import json
import math
import re
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from memoryhub.core.errors import InvalidInput

MAX_DEPTH = 64
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# In JSON text a NUL or a surrogate can only arrive as a \u escape (raw control characters are
# invalid JSON, raw surrogates invalid UTF-8): without one, no string needs checking.
_SUSPICIOUS_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text (None when it can)."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (\\u0000)"
    return "contains a lone surrogate (not valid UTF-8)"


def _path(parts: list[str | int] | tuple[str | int, ...]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _parse_int(text: str) -> int:
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidInput(f"integer {text[:24]}… is outside the 64-bit range", code="invalid_number")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidInput(f"number {text[:24]} is not finite", code="invalid_number")
    return value


def check_document(data: Any, max_depth: int = MAX_DEPTH, *, strings: bool = True) -> None:
    """Raise InvalidInput for the first value no field can store (iterative: no recursion).

    Checks nesting depth, integers beyond 64 bits and non-finite numbers (for documents not
    decoded by :class:`SafeJSONParser`, whose decoder checks numbers as it reads them) and, with
    ``strings``, NUL and lone surrogates in keys and values. Paths are built only for errors."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            _check_scalar(value, where, None, strings)
            continue
        if len(where) >= max_depth:
            raise InvalidInput(f"JSON nested deeper than {max_depth} levels", code="too_deep")
        for key, item in items:
            if strings and isinstance(key, str) and _UNSTORABLE.search(key):
                raise InvalidInput(
                    f"{_path(where)}: a key {text_problem(key)}", code="invalid_text", field=_path(where)
                )
            if isinstance(item, dict | list):
                stack.append((item, (*where, key)))
            elif strings or not isinstance(item, str):
                _check_scalar(item, where, key, strings)


def _check_scalar(value: Any, where: tuple[str | int, ...], key: str | int | None, strings: bool) -> None:
    if isinstance(value, str):
        if strings and _UNSTORABLE.search(value):
            at = _path((*where, key) if key is not None else where)
            raise InvalidInput(f"{at}: {text_problem(value)}", code="invalid_text", field=at)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            at = _path((*where, key) if key is not None else where)
            raise InvalidInput(f"{at}: integer outside the 64-bit range", code="invalid_number", field=at)
    elif isinstance(value, float) and not math.isfinite(value):
        at = _path((*where, key) if key is not None else where)
        raise InvalidInput(f"{at}: number is not finite", code="invalid_number", field=at)


class SafeJSONParser(JSONParser):
    """DRF's JSONParser (strict: no NaN/Infinity literals) plus the checks above. Numbers are
    checked as they are decoded; strings are walked only when the raw text carries a ``\\u0000``
    or surrogate escape, so the ingest hot path pays for the depth walk alone."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            data = json.loads(
                text,
                parse_int=_parse_int,
                parse_float=_parse_float,
                parse_constant=_refuse_constant,
            )
        except RecursionError:
            raise ParseError(f"JSON nested too deeply (more than {MAX_DEPTH} levels)")
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}")
        if _SUSPICIOUS_ESCAPE.search(text):
            check_document(data)  # strings, keys, depth
        else:
            _check_depth(data)  # numbers were checked while decoding; no string can be bad
        return data


def _check_depth(data: Any, max_depth: int = MAX_DEPTH) -> None:
    """Nesting depth only, level by level over containers (the cheap walk of the ingest hot path)."""
    containers = (dict, list)
    level = [data] if type(data) in containers else []
    depth = 0
    while level:
        if depth >= max_depth:
            raise InvalidInput(f"JSON nested deeper than {max_depth} levels", code="too_deep")
        level = [
            item
            for container in level
            for item in (container.values() if type(container) is dict else container)
            if type(item) in containers
        ]
        depth += 1


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name!r} is not valid JSON")
