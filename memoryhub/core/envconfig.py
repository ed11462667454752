"""Settings read from the environment, each parsed and checked when settings load.

``memoryhub/settings.py`` reads every variable through :class:`Env`. Each reader states the form
it expects (an integer in a range, a rate such as ``20/min``, a list of CIDR networks, a URL with
one of some schemes…), records the variable in :data:`REGISTRY`, and a value not of that form
is collected as a problem naming the variable and the form. ``Env.raise_problems()``, the last
line of the settings, stops the process (``ImproperlyConfigured``) with every problem at once,
so ``manage.py check``, runserver, gunicorn and Celery refuse to start instead of failing on the
first request that reads the value.

There is no reader for "any string": a new variable has to say what a bad value is, and
tests/hardening/test_settings_validation.py tries that bad value on every registered variable
(and fails for a variable read some other way).

Pure Python plus django-environ's URL parsing; no Django app code (settings load before apps).
"""

from __future__ import annotations

import builtins
import ipaddress
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import environ
import re2
from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Form:
    """What a variable's value must look like: a description, a parser and one bad example."""

    describe: str  # "an integer ≥ 1": completes "NAME must be …"
    parse: Callable[[str], Any]  # raises ValueError for a value not of the form
    bad: str  # a value the parser refuses (the settings test sets it)


@dataclass(frozen=True)
class Variable:
    name: str
    form: Form
    secret: bool  # never echo the value in a message


REGISTRY: dict[str, Variable] = {}

# RE2 (linear time), like every pattern of ours (tests/hardening/test_regex_linear_time.py).
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_TOKEN = re2.compile(r"[!-~]+")  # printable ASCII, no whitespace
_HEADER = re2.compile(r"[A-Za-z0-9-]+")
_DOTTED = re2.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_EMAIL = re2.compile(r"(?:[^<>\n]*<)?[^@\s<>]+@[^@\s<>]+>?")
_RATE = re2.compile(r"([1-9]\d*)/(s|sec|second|m|min|minute|h|hour|d|day)")
_HOST = re2.compile(r"\.?[A-Za-z0-9*][A-Za-z0-9.*-]*|\[[0-9A-Fa-f:.]+\]|\*")
_ORIGIN = re2.compile(r"https?://[^\s/]+")
_ATTRIBUTE = re2.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]{0,254}")
DB_SCHEMES = frozenset({"postgres", "postgresql", "pgsql", "psql", "sqlite"})
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError


def _fullmatch(pattern: Any, raw: str) -> str:
    if not pattern.fullmatch(raw):
        raise ValueError
    return raw


def _split(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def _regex(raw: str) -> str:
    # The redaction patterns run over event text: they must compile in RE2 (linear time).
    try:
        re2.compile(raw)
    except re2.error as exc:
        raise ValueError from exc
    return raw


def _url(schemes: frozenset[str]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        scheme, sep, rest = raw.partition("://")
        if not sep or scheme.lower() not in schemes or any(c.isspace() for c in raw):
            raise ValueError
        return raw

    return parse


def _db(raw: str) -> dict[str, Any]:
    scheme = raw.partition("://")[0].lower()
    if scheme not in DB_SCHEMES:
        raise ValueError
    return environ.Env.db_url_config(raw)


class Env:
    """Typed, checked reads of environment variables (see the module docstring)."""

    def __init__(self, source: Mapping[str, str] | None = None):
        self.source = os.environ if source is None else source
        self.problems: builtins.list[str] = []

    # -- the one place a variable is read ----------------------------------------------------
    def read(
        self,
        name: str,
        default: Any,
        form: Form,
        *,
        secret: builtins.bool = False,
        optional: builtins.bool = False,
    ) -> Any:
        """The parsed value of ``name``, or ``default`` when unset (or empty, with ``optional``).
        A malformed value is recorded as a problem and ``default`` is returned meanwhile."""
        REGISTRY[name] = Variable(name, form, secret)
        raw = self.source.get(name)
        if raw is None or (optional and raw.strip() == ""):
            return default
        try:
            return form.parse(raw.strip())
        except (ValueError, ImproperlyConfigured):
            shown = "" if secret else f" (got {raw[:80]!r})"
            self.problems.append(f"{name} must be {form.describe}{shown}")
            return default

    def raise_problems(self) -> None:
        if self.problems:
            listed = "\n  ".join(self.problems)
            raise ImproperlyConfigured(
                f"MemoryHub refuses to start: malformed environment settings:\n  {listed}"
            )

    # -- the forms ----------------------------------------------------------------------------
    def int(
        self,
        name: str,
        default: builtins.int,
        *,
        min: builtins.int | None = None,
        max: builtins.int | None = None,
    ) -> builtins.int:
        def parse(raw: str) -> builtins.int:
            value = int(raw)
            if (min is not None and value < min) or (max is not None and value > max):
                raise ValueError
            return value

        return self.read(name, default, Form(_range("an integer", min, max), parse, "12abc"))

    def float(
        self,
        name: str,
        default: builtins.float,
        *,
        min: builtins.float | None = None,
        max: builtins.float | None = None,
    ) -> builtins.float:
        def parse(raw: str) -> builtins.float:
            value = float(raw)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError
            if (min is not None and value < min) or (max is not None and value > max):
                raise ValueError
            return value

        return self.read(name, default, Form(_range("a number", min, max), parse, "fast"))

    def bool(self, name: str, default: builtins.bool) -> builtins.bool:
        return self.read(
            name, default, Form("true or false (also 1/0, yes/no, on/off)", _parse_bool, "maybe")
        )

    def choice(
        self, name: str, default: str, choices: tuple[str, ...], *, upper: builtins.bool = False
    ) -> str:
        def parse(raw: str) -> str:
            value = raw.upper() if upper else raw
            if value not in choices:
                raise ValueError
            return value

        return self.read(name, default, Form("one of " + ", ".join(choices), parse, "bogus"))

    def token(
        self, name: str, default: str, *, secret: builtins.bool = False, min_length: builtins.int = 1
    ) -> str:
        """Printable ASCII without spaces (names, keys, prefixes); empty = unset."""

        def parse(raw: str) -> str:
            if len(raw) < min_length:
                raise ValueError
            return _fullmatch(_TOKEN, raw)

        describe = "printable ASCII without spaces" + (
            f", at least {min_length} characters" if min_length > 1 else ""
        )
        return self.read(name, default, Form(describe, parse, "two\twords"), secret=secret, optional=True)

    def url(self, name: str, default: str, schemes: tuple[str, ...], *, secret: builtins.bool = False) -> str:
        """A URL with one of ``schemes``; empty = unset (``default``)."""
        form = Form(
            "a URL starting with " + " or ".join(f"{s}://" for s in schemes),
            _url(frozenset(schemes)),
            "not a url",
        )
        return self.read(name, default, form, secret=secret, optional=True)

    def db(self, name: str, default: str) -> dict[str, Any]:
        form = Form(
            "a database URL (postgres://user:password@host:port/name or sqlite:///path)", _db, "mongodb://h/x"
        )
        # An unset (or empty) variable means ``default``; {} when there is none (e.g. no replica).
        return self.read(name, _db(default) if default else {}, form, secret=True, optional=True)

    def rate(self, name: str, default: str) -> str:
        return self.read(
            name,
            default,
            Form(
                "a rate <count>/<s|min|h|d>, e.g. 20/min", lambda raw: _fullmatch(_RATE, raw), "20 per minute"
            ),
        )

    def dotted_path(self, name: str, default: str) -> str:
        return self.read(
            name,
            default,
            Form(
                "a dotted Python path, e.g. package.module.Class",
                lambda raw: _fullmatch(_DOTTED, raw),
                "console",
            ),
        )

    def email(self, name: str, default: str) -> str:
        return self.read(
            name,
            default,
            Form(
                "an e-mail address (user@host or Name <user@host>)",
                lambda raw: _fullmatch(_EMAIL, raw),
                "nobody",
            ),
        )

    def header(self, name: str, default: str) -> str:
        return self.read(
            name,
            default,
            Form(
                "an HTTP header name (letters, digits, dashes), e.g. X-Forwarded-For",
                lambda raw: _fullmatch(_HEADER, raw),
                "X Forwarded For",
            ),
            optional=True,
        )

    def path(self, name: str, default: Path) -> Path:
        """A directory MemoryHub writes to. Reading the settings creates nothing (whoever writes
        there makes it: ``make demo``, the broker, the tests); a set value that can never be a
        directory (a file in its way) stops the start naming the variable, rather than the first
        write failing later with the file's error alone ("unable to open database file")."""

        def parse(raw: str) -> Path:
            path = Path(raw)
            if not path.is_absolute():
                raise ValueError
            existing = next(p for p in (path, *path.parents) if p.exists())
            if not existing.is_dir():
                raise ValueError
            return path

        return self.read(
            name,
            default,
            Form("an absolute path of a directory (or of one that can be made there)", parse, "relative/dir"),
            optional=True,
        )

    def list(self, name: str, default: builtins.list[str], item: Form) -> builtins.list[str]:
        """Comma-separated; every item must be of the ``item`` form."""

        def parse(raw: str) -> builtins.list[Any]:
            return [item.parse(part) for part in _split(raw)]

        form = Form(f"a comma-separated list of {item.describe}", parse, f"{_good_example(item)},{item.bad}")
        return self.read(name, default, form)


def _range(what: str, low: Any, high: Any) -> str:
    if low is not None and high is not None:
        return f"{what} from {low} to {high}"
    if low is not None:
        return f"{what} ≥ {low}"
    if high is not None:
        return f"{what} ≤ {high}"
    return what


def _good_example(item: Form) -> str:
    # The list's bad example mixes a good item with a bad one: one bad entry must spoil the list.
    return ITEM_EXAMPLES.get(item.describe, "")


def _network(raw: str) -> str:
    ipaddress.ip_network(raw, strict=False)  # ValueError for a host name
    return raw


NETWORK = Form(
    "networks in CIDR notation (e.g. 127.0.0.1/32, 10.0.0.0/8, ::1/128)", _network, "hooks.example.com"
)
HOST = Form(
    "host names (e.g. example.com, .example.com, 127.0.0.1, *)",
    lambda raw: _fullmatch(_HOST, raw),
    "https://example.com",
)
ORIGIN = Form(
    "origins with their scheme (e.g. https://memoryhub.example.com)",
    lambda raw: _fullmatch(_ORIGIN, raw),
    "memoryhub.example.com",
)
ATTRIBUTE = Form(
    "span attribute names (letters, digits, '_', '.', '-', '/'; e.g. app.conversation_id)",
    lambda raw: _fullmatch(_ATTRIBUTE, raw),
    "two words",
)
REGEX = Form("regular expressions RE2 accepts (no backreferences or lookaround)", _regex, "(unclosed")
ITEM_EXAMPLES = {
    ATTRIBUTE.describe: "app.conversation_id",
    NETWORK.describe: "127.0.0.1/32",
    HOST.describe: "example.com",
    ORIGIN.describe: "https://a.example",
    REGEX.describe: r"CUST-\d+",
}
