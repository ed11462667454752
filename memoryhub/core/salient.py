"""Salient units and obligation sentences of any text an agent sees (pure Python, no Django).

One extractor for compactors, the validator, the pages and the benchmark. It is not shaped by any
generator: it reads numbers in any notation (``12.500``, ``12,500``, ``12 500``, ``49,00 EUR``,
``$649.00``, ``15%``), numbers with units in any script (``30 Sekunden``, ``30秒``, ``5回``,
``118 cm``), dates and times (ISO, ``25 March``, ``14. April``, ``March 3rd``, ``4月14日``, epoch
seconds), identifiers of any shape (``4471-2290-18``, ``1Z999AA10123456784``, ``LEG-ALU-72``,
git SHAs, UUIDs), paths with line numbers, URLs, e-mails, code symbols, quoted literals and
proper names — in English, German, Japanese and anything written in Unicode letters and digits.

How it stays linear on hostile input: the text is cut into chunks by one character-class pattern
(a single pass), each chunk longer than ``MAX_CHUNK`` is a payload blob and is not analysed, and
every classifying pattern is anchored (``\\A…\\Z``) without nested or overlapping quantifiers, so
it does bounded work per chunk. Results are cached per text (``lru_cache``).

* ``units(text)`` — every salient unit with its kind, a normalised value (``norm``) and its span.
* ``sentences(text)`` — sentence spans (line breaks, ``.!?。！？``; ``14. April``, ``e.g.``,
  ``3.14`` and ``refunds.py`` do not end a sentence).
* ``obligations(text)`` — sentences carrying a requirement, constraint, safety rule, decision,
  approval, preference or open item (cue words in English, German and Japanese), with polarity.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import re
from dataclasses import dataclass

import regex
from sqlparse import keywords as sqlparse_keywords

# -- the data model -------------------------------------------------------------------------------

KINDS = (
    "number",
    "money",
    "quantity",
    "date",
    "time",
    "identifier",
    "path",
    "url",
    "email",
    "symbol",
    "quoted",
    "name",
)


@dataclass(frozen=True)
class Unit:
    """One salient unit found in a text."""

    text: str  # as written
    kind: str  # one of KINDS
    norm: str  # normalised value used for matching ("12500", "2026-04-14", "30 s", "USD 649")
    start: int
    end: int


@dataclass(frozen=True)
class Obligation:
    """A sentence that obliges, forbids, decides, approves, prefers or leaves something open."""

    sentence: str
    start: int
    end: int
    polarity: str  # "positive" | "negative"
    cue: str  # the cue word found
    units: tuple[Unit, ...]
    kind: str = "requirement"  # requirement | decision | approval | preference | open_item


MAX_CHUNK = 256  # longer whitespace-free runs are payloads (base64, minified JSON): not units
_CACHE_CHARS = 20_000

# -- chunking -------------------------------------------------------------------------------------

# CJK runs are their own chunks (Japanese has no spaces): "30秒以内に5回" → 30 | 秒以内 | に | 5 | 回.
_CJK = r"\p{Han}\p{Katakana}ー々"
_CHUNK = regex.compile(
    r"["
    + _CJK
    + r"]+|\p{Hiragana}+|[^\s"
    + _CJK
    + r"\p{Hiragana}、。，．！？「」『』（）【】：；()\[\]<>=;\"|]+"
)
_LEAD = "([{<\"'“”„‘’«»*‚「『（【"
_TRAIL = ")]}>\"'“”‘’»,;:!?*…」』）】"


def chunks(text: str) -> list[tuple[str, int, int]]:
    """Whitespace/script-separated chunks of ``text`` with edge punctuation trimmed: (text, start, end).

    Brackets, ``=``, ``;``, ``|`` and double quotes separate chunks (``GatewayError(GATEWAY_TIMEOUT)``,
    table cells, JSON); so does ``::`` (``tests/test_x.py::test_y`` is a file and a test)."""
    out: list[tuple[str, int, int]] = []
    for m in _CHUNK.finditer(text):
        s, e = m.span()
        while s < e:
            cut = text.find("::", s, e)
            end = e if cut < 0 else cut
            _split_commas_into(out, text, s, end)
            s = end + 2
    return out


def _split_commas_into(out: list[tuple[str, int, int]], text: str, s: int, e: int) -> None:
    """A comma between two digits is a separator of one number (1.250,00); any other comma inside a
    chunk separates fields (a CSV row: INV-3301,Globex,1.250,00,EUR)."""
    start = s
    at = text.find(",", s, e)
    while at >= 0:
        if not (at > s and at + 1 < e and text[at - 1].isdigit() and text[at + 1].isdigit()):
            _trim_into(out, text, start, at)
            start = at + 1
        at = text.find(",", at + 1, e)
    _trim_into(out, text, start, e)


def _trim_into(out: list[tuple[str, int, int]], text: str, s: int, e: int) -> None:
    while s < e and text[s] in _LEAD:
        s += 1
    if e - s > 1 and text[s] in "+-" and text[s + 1].isalpha():
        s += 1  # a diff's "+"/"-" or a bullet's "-" before a word ("+GATEWAY_TIMEOUT = 30")
    while e > s and (text[e - 1] in _TRAIL or text[e - 1] == "."):
        e -= 1  # a sentence's full stop is not part of "4471-2290-18." ("14." is kept below)
    if s < e:
        out.append((text[s:e], s, e))


# -- numbers --------------------------------------------------------------------------------------

_NUM = re.compile(
    r"\A[-+−]?(?:\d{1,3}(?:(?P<sep>[.,\u00a0\u202f’' ])\d{3})(?:(?P=sep)\d{3})*|\d+)(?:[.,]\d+)?\Z"
)
_ORDINAL = re.compile(r"\A(\d{1,2})(?:st|nd|rd|th|\.)\Z")
_CURRENCY_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR", "￥": "JPY", "₩": "KRW"}
_CURRENCY_CODES = frozenset(
    [
        "USD",
        "EUR",
        "GBP",
        "JPY",
        "CHF",
        "CAD",
        "AUD",
        "CNY",
        "INR",
        "SEK",
        "NOK",
        "DKK",
        "PLN",
        "CZK",
        "BRL",
        "MXN",
        "KRW",
        "SGD",
        "HKD",
        "NZD",
        "BHD",
        "ZAR",
    ]
)
_CURRENCY_WORDS = {
    "euro": "EUR",
    "euros": "EUR",
    "dollar": "USD",
    "dollars": "USD",
    "円": "JPY",
    "元": "CNY",
    "franken": "CHF",
    "pfund": "GBP",
}


def number_norm(raw: str) -> str | None:
    """``12.500`` / ``12,500`` / ``12 500`` → ``12500``; ``49,00`` → ``49``; ``3.14`` → ``3.14``."""
    s = raw.replace("−", "-").lstrip("+")
    if not _NUM.match(s):
        return None
    sign = "-" if s.startswith("-") else ""
    body = s.lstrip("-")
    seps = [c for c in body if not c.isdigit()]
    if not seps:
        return sign + body
    if any(c in "\u00a0\u202f’' " for c in seps):
        integer, decimal = body, ""
        for c in "\u00a0\u202f’' ":
            integer = integer.replace(c, "")
        if "," in integer or "." in integer:
            cut = max(integer.rfind(","), integer.rfind("."))
            integer, decimal = integer[:cut], integer[cut + 1 :]
    elif len(set(seps)) == 2:  # 1.234,56 or 1,234.56: the last separator is the decimal one
        cut = max(body.rfind(","), body.rfind("."))
        integer, decimal = body[:cut].replace(",", "").replace(".", ""), body[cut + 1 :]
    elif len(seps) > 1:  # 1.234.567
        integer, decimal = body.replace(seps[0], ""), ""
    else:
        left, right = body.split(seps[0])
        # One separator before exactly three digits is a thousands separator (12.500, 12,500);
        # the ambiguity is settled the way invoices and German/English prose write amounts.
        if len(right) == 3 and 1 <= len(left) <= 3 and left != "0":
            integer, decimal = left + right, ""
        else:
            integer, decimal = left, right
    decimal = decimal.rstrip("0")
    integer = integer.lstrip("0") or "0"
    return sign + integer + ("." + decimal if decimal else "")


# -- units of measure (canonical name per word, any language) ---------------------------------------

_UNIT_WORDS: dict[str, str] = {}
for _canon, _words in {
    "ms": "ms msec millisecond milliseconds millisekunde millisekunden milliseconde millisecondes milisegundo milisegundos ミリ秒 毫秒",
    "µs": "µs us microsecond microseconds",
    "ns": "ns nanosecond nanoseconds",
    "s": "s sec secs second seconds sekunde sekunden sek seconde secondes segundo segundos 秒 秒間 秒钟",
    "min": "min mins minute minutes minuten minuto minutos 分 分間 分钟",
    "h": "h hr hrs hour hours stunde stunden std heure heures hora horas 時間 小时 个小时",
    "d": "d day days tag tage tagen werktage werktagen jour jours día días dia dias 日 日間 天 个工作日 工作日",
    "wk": "wk week weeks woche wochen semaine semaines semana semanas 週 週間 周 个星期 星期",
    "mo": "month months monat monate monaten mois mes meses ヶ月 か月 カ月 ヵ月 个月",
    "yr": "yr yrs year years jahr jahre jahren 年間",
    "times": "x × times mal attempts attempt retries retry tries versuche versuch fois vez veces 回 度 次",
    "%": "% percent prozent パーセント",
    "cm": "cm",
    "mm": "mm",
    "m": "m meter metre meters metres",
    "km": "km",
    "kg": "kg",
    "g": "g gram grams gramm",
    "B": "b byte bytes",
    "KB": "kb kib",
    "MB": "mb mib",
    "GB": "gb gib",
    "TB": "tb tib",
    "tokens": "token tokens トークン",
    "chars": "char chars character characters zeichen 文字",
    "lines": "line lines zeilen zeile 行",
    "rows": "row rows",
    "items": "item items stück stk 件 個 点 个",
    "files": "file files dateien datei",
    "tests": "test tests",
    "requests": "request requests anfragen req/s rps qps",
    "workers": "worker workers",
    "users": "user users nutzer benutzer",
    "people": "people persons personen 人 名",
    "px": "px",
    "MHz": "mhz",
    "GHz": "ghz",
    "°C": "°c",
}.items():
    for _w in _words.split():
        _UNIT_WORDS[_w] = _canon
# Japanese counters glued to the following word: the longest known counter at the chunk's start.
_CJK_COUNTERS = sorted((w for w in _UNIT_WORDS if not w.isascii()), key=len, reverse=True)

_MONTHS: dict[str, int] = {}
for _i, _names in enumerate(
    [
        "january jan januar jänner janvier enero",
        "february feb februar février fevrier febrero",
        "march mar märz mär mrz mars marzo",
        "april apr avril abril",
        "may mai mayo",
        "june jun juni juin junio",
        "july jul juli juillet julio",
        "august aug août aout agosto",
        "september sep sept septembre septiembre",
        "october oct oktober okt octobre octubre",
        "november nov novembre noviembre",
        "december dec dezember dez décembre decembre diciembre",
    ],
    start=1,
):
    for _w in _names.split():
        _MONTHS[_w] = _i

# -- chunk classifiers (anchored: bounded work per chunk) -----------------------------------------

_URL = re.compile(r"\A(?:(?:https?|ftp|wss?)://|www\.)[^\s]+\Z", re.IGNORECASE)
_EMAIL = re.compile(r"\A[\w.+-]+@[\w-]+(?:\.[\w-]+)+\Z")
_ISO_DATE = re.compile(
    r"\A(?P<d>\d{4}-\d{2}-\d{2})(?:[T ](?P<t>\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\Z"
)
_TIME = re.compile(r"\A(\d{1,2}):(\d{2})(?::\d{2})?Z?\Z")
_EPOCH = re.compile(r"\A1\d{9}(?:\d{3})?\Z")
_EXT = (
    r"py|pyi|ya?ml|json|jsonl|md|rst|txt|toml|ini|cfg|conf|ts|tsx|js|jsx|mjs|go|rs|java|kt|rb|php|"
    r"c|h|cc|cpp|hpp|cs|sql|sh|bash|csv|log|html|css|xml|proto|lock|env|tf|gradle|ipynb|parquet|"
    r"swift|scala|vue|svelte|pdf|png|jpg|zip|gz"
)
_FILE = re.compile(r"\A[\w@{}-]+(?:\.[\w@{}-]+)*\.(?:" + _EXT + r")(?::\d+){0,2}\Z", re.IGNORECASE)
_SLASHED = re.compile(r"\A(?:~|\.{1,2})?/?[\w.@{}:+-]+(?:/[\w.@{}:+-]*)+\Z")
_SEPARATED = re.compile(r"\A[^\W_]+(?:[-_.:/#+][^\W_]+)+\Z")
_HAS_DIGIT = re.compile(r"\d")
_HAS_LETTER = re.compile(r"[^\W\d_]")
_CONSTANT = re.compile(r"\A[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\Z")
_SNAKE = re.compile(r"\A_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+\Z")
_CAMEL = re.compile(r"\A[a-z]+(?:[A-Z][a-z0-9]*)+\Z")
_PASCAL = re.compile(r"\A[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\Z")
_ACRONYM_PASCAL = re.compile(r"\A[A-Z]{2,}[a-z]{2,}(?:[A-Z][a-z0-9]*)*\Z")  # OOMKilled, HTTPServer
_DOTTED = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+(?:\(\))?\Z")
_CALL = re.compile(r"\A[A-Za-z_][A-Za-z0-9_.]*\(\)\Z")
_HEADER = re.compile(r"\A[A-Z][a-z]+(?:-[A-Z][a-z]+)+\Z")
_ACRONYM = re.compile(r"\A[A-Z]{2,10}\Z")
_UPPER_JOINED = re.compile(r"\A[A-Z0-9]{2,}(?:[-_][A-Z0-9]+)+\Z")
_QUOTED = re.compile(
    r"\"(?![\s:,])([^\"\n]{3,160})(?<![\s,])\"(?!\s*:)|“([^”\n]{3,160})”|„([^“”\n]{3,160})[“”]|「([^」\n]{1,160})」"
    r"|`([^`\n]{2,200})`|(?<!\w)'([^'\n]{3,160})'(?!\w)"
)
_WS = re.compile(r"\s+")
_RANGE = re.compile(r"\A\d{1,4}[-–]\d{1,4}\Z")
_RANGE_SPLIT = re.compile(r"[-–]")
_THOUSANDS_TAIL = re.compile(r"\A\d{3}(?:[.,]\d+)?\Z")
_GLUED = re.compile(r"\A(\d+(?:[.,]\d+)?)([^\W\d_]+|/s|°C)\Z")  # 250ms, 118cm, 3x
_ALNUM = re.compile(r"\A[^\W_]+\Z")
_LETTERS = re.compile(r"[^\W\d_]+")

# Capitalised words that are not names: sentence-level function words, cue words, log levels.
_NOT_NAMES = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "herr",
        "frau",
        "hr",
        "fr",
        "sir",
        "madam",
        "mx",
        "a",
        "an",
        "the",
        "i",
        "we",
        "you",
        "he",
        "she",
        "it",
        "they",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "then",
        "when",
        "if",
        "as",
        "at",
        "by",
        "for",
        "from",
        "in",
        "into",
        "of",
        "on",
        "or",
        "and",
        "but",
        "not",
        "no",
        "yes",
        "to",
        "with",
        "without",
        "after",
        "before",
        "until",
        "while",
        "please",
        "note",
        "must",
        "never",
        "always",
        "only",
        "do",
        "does",
        "don't",
        "should",
        "shall",
        "may",
        "might",
        "can",
        "cannot",
        "will",
        "would",
        "could",
        "also",
        "all",
        "any",
        "each",
        "every",
        "some",
        "none",
        "ok",
        "okay",
        "error",
        "errors",
        "warning",
        "warn",
        "info",
        "debug",
        "trace",
        "fatal",
        "critical",
        "failed",
        "fail",
        "failure",
        "passed",
        "pass",
        "success",
        "true",
        "false",
        "null",
        "none",
        "todo",
        "fixme",
        "note",
        "notes",
        "summary",
        "decision",
        "decided",
        "approved",
        "approval",
        "requirement",
        "required",
        "constraint",
        "open",
        "question",
        "user",
        "assistant",
        "system",
        "tool",
        "agent",
        "customer",
        "support",
        "order",
        "total",
        "subtotal",
        "tax",
        "shipping",
        "status",
        "result",
        "results",
        "step",
        "steps",
        "test",
        "tests",
        "date",
        "time",
        "today",
        "tomorrow",
        "yesterday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "der",
        "die",
        "das",
        "ein",
        "eine",
        "und",
        "oder",
        "nicht",
        "nie",
        "niemals",
        "muss",
        "darf",
        "bitte",
        "sie",
        "wir",
        "ich",
        "er",
        "es",
        "den",
        "dem",
        "des",
        "im",
        "am",
        "zum",
        "zur",
        "bei",
        "mit",
        "von",
        "für",
        "auf",
        "aus",
        "nach",
        "vor",
        "bis",
        "ist",
        "sind",
        "wird",
        "werden",
        "http",
        "https",
        "api",
        "json",
        "url",
        "id",
        "uuid",
        "sha",
        "utc",
        "gmt",
        "iso",
        # HTTP reason phrases and auth schemes are capitalised words, not names
        *[
            "bearer",
            "basic",
            "digest",
            "forbidden",
            "unauthorized",
            "conflict",
            "created",
            "accepted",
            "found",
            "gone",
        ],
        *[
            "unprocessable",
            "entity",
            "content",
            "internal",
            "server",
            "gateway",
            "timeout",
            "unavailable",
            "payment",
        ],
        *["method", "acceptable", "precondition", "moved", "permanently", "redirect"],
    ]
) | frozenset(_MONTHS)
_ACRONYM_STOP = frozenset(
    [
        "OK",
        "ERROR",
        "ERRORS",
        "WARN",
        "WARNING",
        "INFO",
        "DEBUG",
        "TRACE",
        "FATAL",
        "CRITICAL",
        "FAIL",
        "FAILED",
        "FAILURE",
        "PASS",
        "PASSED",
        "SUCCESS",
        "TODO",
        "FIXME",
        "NOTE",
        "MUST",
        "NOT",
        "NEVER",
        "ALWAYS",
        "ONLY",
        "DO",
        "SHALL",
        "SHOULD",
        "MAY",
        "AND",
        "OR",
        "THE",
        "NO",
        "YES",
        "API",
        "URL",
        "JSON",
        "HTTP",
        "HTTPS",
        "ID",
        "UUID",
        "SHA",
        "UTC",
        "GMT",
        "ISO",
        "XML",
        "HTML",
        "CSS",
        "PDF",
        "CLI",
    ]
) | frozenset(
    # SQL keywords (sqlparse's list: ALTER, TABLE, NULL, WHERE, TYPE, DEFAULT…): an upper-case
    # word of a statement or a table header is vocabulary, not a name a summary must restate.
    set(sqlparse_keywords.KEYWORDS) | set(sqlparse_keywords.KEYWORDS_COMMON)
)
_TITLES = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "herr", "frau", "hr", "fr", "sir", "madam", "mx"]
)  # "Frau Schäfer": a title makes the next capitalised word a name even in German
_GERMAN_WORDS = frozenset(
    [
        "der",
        "die",
        "das",
        "und",
        "ist",
        "nicht",
        "muss",
        "müssen",
        "darf",
        "werden",
        "mit",
        "für",
        "bis",
        "ein",
        "eine",
        "auf",
        "zu",
        "den",
        "dem",
    ]
)


_COMPANY_SUFFIXES = frozenset(
    ["GmbH", "AG", "KG", "SE", "Ltd", "Inc", "LLC", "Corp", "BV", "SA", "SAS", "Co", "Ltd."]
)


def _capitalised(chunk: str) -> bool:
    """Schäfer, Anna, Jean-Luc: an upper-case letter, then lower-case letters (any script)."""
    if chunk in _COMPANY_SUFFIXES:
        return True
    parts = chunk.split("-")
    return len(parts) <= 2 and all(
        len(p) >= 2 and p.isalpha() and p[0].isupper() and p[1:].islower() for p in parts
    )


def _is_german(text: str) -> bool:
    words = _LETTERS.findall(text[:4000].lower())
    hits = sum(1 for w in words if w in _GERMAN_WORDS)
    return hits >= 2 and hits * 12 >= len(words)


@functools.lru_cache(maxsize=65536)
def _classify(chunk: str) -> tuple[str, str] | None:
    """(kind, norm) of one chunk on its own, or None."""
    if len(chunk) > MAX_CHUNK:
        return None
    if _URL.match(chunk):
        return "url", chunk.rstrip("/.").lower() if chunk.islower() else chunk.rstrip("/.")
    if "@" in chunk and _EMAIL.match(chunk):
        return "email", chunk.lower()
    if chunk[0] in _CURRENCY_SYMBOLS or chunk[-1] in _CURRENCY_SYMBOLS:
        sym = chunk[0] if chunk[0] in _CURRENCY_SYMBOLS else chunk[-1]
        value = number_norm(chunk.strip("".join(_CURRENCY_SYMBOLS)))
        if value is not None:
            return "money", f"{_CURRENCY_SYMBOLS[sym]} {value}"
    if chunk.endswith("%"):
        value = number_norm(chunk[:-1])
        if value is not None:
            return "quantity", f"{value} %"
    m = _ISO_DATE.match(chunk)
    if m:
        return "date", m.group("d") + (f"T{m.group('t')}" if m.group("t") else "")
    m = _TIME.match(chunk)
    if m and int(m.group(1)) < 24 and int(m.group(2)) < 60:
        return "time", f"{int(m.group(1)):02d}:{m.group(2)}"
    if _EPOCH.match(chunk):
        seconds = int(chunk[:10])
        return "date", dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    value = number_norm(chunk)
    if value is not None:
        return "number", value
    glued = _GLUED.match(chunk)  # 250ms, 5.6s, 118cm, 3x
    if glued and _unit_word(glued.group(2)) is not None:
        return "quantity", f"{number_norm(glued.group(1))} {_unit_word(glued.group(2))}"
    if _FILE.match(chunk):
        return "path", chunk
    has_digit = bool(_HAS_DIGIT.search(chunk))
    has_letter = bool(_HAS_LETTER.search(chunk))
    if (
        "/" in chunk
        and _SLASHED.match(chunk)
        and (has_digit or "." in chunk or "_" in chunk or chunk[0] in "/~.")
    ):
        return "path", chunk
    if (
        _CONSTANT.match(chunk)
        or _SNAKE.match(chunk)
        or _CAMEL.match(chunk)
        or _PASCAL.match(chunk)
        or _ACRONYM_PASCAL.match(chunk)
    ):
        return "symbol", chunk
    if has_digit and has_letter and (_SEPARATED.match(chunk) or _ALNUM.match(chunk)):
        return "identifier", chunk
    if _RANGE.match(chunk) and _ascending(chunk):  # "events 1-20", "seqs 11-40": a span, not an id
        return None
    if has_digit and _SEPARATED.match(chunk):  # 4471-2290-18, 1.2.3
        return "identifier", chunk
    if _UPPER_JOINED.match(chunk):  # LEG-ALU, ERR_X handled above
        return "identifier", chunk
    if _DOTTED.match(chunk) or _CALL.match(chunk):
        return "symbol", chunk
    if _HEADER.match(chunk):
        return "symbol", chunk
    if _ACRONYM.match(chunk) and chunk not in _ACRONYM_STOP:
        return "name", chunk
    return None


# One setting per line, as YAML, INI, .env and properties files write it: "  attempts: 6",
# "provider: adyen", "MODE=fast". Its value is what the line says, whatever its shape.
_SETTING_LINE = re.compile(
    r"(?m)^[ \t]*(?:- )?[A-Za-z_][\w.-]{0,60}[ \t]*[:=][ \t]*([^\s#'\"{}\[\],][^\s'\"{}\[\],]{0,119})"
    r"(?:[ \t]+#[^\n]*)?[ \t]*$"
)


def _with_setting_values(text: str, found: list[Unit]) -> list[Unit]:
    """``found`` plus the value of every one-setting line that no unit covers already (a lone
    digit, a lower-case word, a vault reference): a config's values are its content."""
    extra = []
    for m in _SETTING_LINE.finditer(text):
        s, e = m.span(1)
        before = bisect.bisect_left(found, s, key=lambda u: u.start)
        if within(found, s, e) or (before and found[before - 1].end > s):
            continue  # a unit already states (part of) this value
        value = m.group(1)
        norm = number_norm(value)
        extra.append(
            Unit(value, "number", norm, s, e) if norm is not None else Unit(value, "identifier", value, s, e)
        )
    return sorted(found + extra, key=lambda u: (u.start, u.end)) if extra else found


_LONE_DIGIT = re.compile(r"(?<![\w.,])\d(?!\w|[.,:]\d)")
_HUNK_HEADER = re.compile(r"(?m)^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def _without_header_runs(text: str, found: list[Unit]) -> list[Unit]:
    """Upper-case words three or more in a row on one line ("NAME READY STATUS RESTARTS AGE",
    "LAST SEEN TYPE REASON OBJECT") are a table's header or a shouted phrase, not names."""
    run: list[int] = []
    drop: set[int] = set()

    def close() -> None:
        if len(run) >= 3:
            drop.update(run)
        run.clear()

    for k, u in enumerate(found):
        if u.kind == "name" and _ACRONYM.match(u.text):
            if run and text[found[run[-1]].end : u.start].strip(" \t"):
                close()
            run.append(k)
        else:
            close()
    close()
    return [u for k, u in enumerate(found) if k not in drop] if drop else found


def _ascending(chunk: str) -> bool:
    first, last = _RANGE_SPLIT.split(chunk)
    return int(first) < int(last)


def is_unit(chunk: str) -> bool:
    """Whether one chunk on its own is a salient unit (a number, identifier, symbol, acronym…)."""
    return _classify(chunk) is not None


def within(found: list[Unit], start: int, end: int) -> list[Unit]:
    """The units of ``found`` (sorted by start, as ``units`` returns them) inside [start, end)."""
    i = bisect.bisect_left(found, start, key=lambda u: u.start)
    out = []
    while i < len(found) and found[i].start < end:
        if found[i].end <= end:
            out.append(found[i])
        i += 1
    return out


def _unit_word(word: str) -> str | None:
    w = word.lower().rstrip(".")
    if w in _UNIT_WORDS:
        return _UNIT_WORDS[w]
    if word[:1].isascii():
        return None
    for counter in _CJK_COUNTERS:
        if word.startswith(counter):
            return _UNIT_WORDS[counter]
    return None


def _day(chunk: str) -> int | None:
    m = _ORDINAL.match(chunk)
    text = m.group(1) if m else chunk
    if text.isdigit() and len(text) <= 2 and 1 <= int(text) <= 31:
        return int(text)
    return None


def _year(chunk: str) -> int | None:
    text = chunk.rstrip(".,")
    return int(text) if len(text) == 4 and text.isdigit() and 1900 <= int(text) <= 2200 else None


def _date_norm(year: int | None, month: int, day: int) -> str:
    return f"{year:04d}-{month:02d}-{day:02d}" if year else f"--{month:02d}-{day:02d}"


@functools.lru_cache(maxsize=4096)
def _units_cached(text: str) -> tuple[Unit, ...]:
    return tuple(_units(text))


def units(text: str) -> list[Unit]:
    """Every salient unit of ``text``, in order of appearance (a unit may span several chunks)."""
    if not text:
        return []
    if len(text) <= _CACHE_CHARS:
        return list(_units_cached(text))
    return _units(text)


def _units(text: str) -> list[Unit]:
    # A diff's hunk header ("@@ -1,6 +1,8 @@") holds line counts, not values: masked (same length,
    # so every offset still points into ``text``).
    parts = chunks(_HUNK_HEADER.sub(lambda m: " " * len(m.group()), text) if "@@" in text else text)
    german = _is_german(text)
    starts = {s for s, _ in sentences(text)}  # a clause start counts as a sentence start
    found: list[Unit] = []
    i, n = 0, len(parts)

    def gap(a: int, b: int) -> str:  # the text between chunk a and chunk b
        return text[parts[a][2] : parts[b][1]]

    def near(a: int) -> bool:  # chunk a+1 follows chunk a after at most one space
        return a + 1 < n and gap(a, a + 1) in ("", " ", "\u00a0", "\u202f")

    def add(kind: str, norm: str, a: int, b: int) -> None:
        s, e = parts[a][1], parts[b][2]
        found.append(Unit(text[s:e], kind, norm, s, e))

    while i < n:
        chunk, s, e = parts[i]
        nxt = parts[i + 1][0] if i + 1 < n else ""
        # Japanese dates: [2026年]4月14日
        if chunk.isdigit() and near(i) and nxt.startswith(("年", "月")):
            year = month = day = None
            j = i
            if nxt.startswith("年") and len(chunk) == 4:
                year, j = int(chunk), i + 2
            if j + 1 < n and parts[j][0].isdigit() and parts[j + 1][0].startswith("月"):
                month = int(parts[j][0])
                if j + 3 < n and parts[j + 2][0].isdigit() and parts[j + 3][0].startswith("日"):
                    day = int(parts[j + 2][0])
                    if 1 <= month <= 12 and 1 <= day <= 31:
                        add("date", _date_norm(year, month, day), i, j + 3)
                        i = j + 4
                        continue
        # 12 500 (a space as thousands separator): the two parts become one
        if (
            chunk.isdigit()
            and len(chunk) <= 3
            and chunk != "0"
            and near(i)
            and gap(i, i + 1)
            and _THOUSANDS_TAIL.match(nxt)
        ):
            e = parts[i + 1][2]
            chunk = text[s:e]
            i += 1
            parts[i] = (chunk, s, e)
            nxt = parts[i + 1][0] if i + 1 < n else ""
        # dates with month names: 14. April [2026] | 25 March | March 3rd[, 2026] | 15 de junio [de 2026]
        day = _day(chunk)
        if (
            day is not None
            and i + 2 < n
            and nxt.lower() == "de"
            and near(i)
            and near(i + 1)
            and parts[i + 2][0].lower().rstrip(".,") in _MONTHS
        ):
            month, j = _MONTHS[parts[i + 2][0].lower().rstrip(".,")], i + 2
            year = None
            if j + 2 < n and parts[j + 1][0].lower() == "de" and near(j) and near(j + 1):
                year = _year(parts[j + 2][0])
            add("date", _date_norm(year, month, day), i, j + 2 if year else j)
            i = j + (3 if year else 1)
            continue
        if (
            day is not None
            and (near(i) or (i + 1 < n and gap(i, i + 1) == ". "))
            and nxt.lower().rstrip(".,") in _MONTHS
        ):
            month = _MONTHS[nxt.lower().rstrip(".,")]
            j = i + 1
            year = _year(parts[j + 1][0]) if j + 1 < n and near(j) else None
            add("date", _date_norm(year, month, day), i, j + 1 if year else j)
            i = j + (2 if year else 1)
            continue
        if chunk.lower().rstrip(".") in _MONTHS and near(i) and _day(nxt.rstrip(",")) is not None:
            month, day2 = _MONTHS[chunk.lower().rstrip(".")], _day(nxt.rstrip(","))
            assert day2 is not None
            j = i + 1
            year = _year(parts[j + 1][0]) if j + 1 < n and gap(j, j + 1).strip(", ") == "" else None
            add("date", _date_norm(year, month, day2), i, j + 1 if year else j)
            i = j + (2 if year else 1)
            continue
        kind_norm = _classify(chunk)
        if kind_norm and kind_norm[0] == "number":
            value = kind_norm[1]
            # money: 49,00 EUR | EUR 49,00 | 649 dollars | 1.200円
            if nxt in _CURRENCY_CODES and near(i):
                add("money", f"{nxt} {value}", i, i + 1)
                i += 2
                continue
            if nxt.lower() in _CURRENCY_WORDS and near(i):
                add("money", f"{_CURRENCY_WORDS[nxt.lower()]} {value}", i, i + 1)
                i += 2
                continue
            if nxt in _CURRENCY_SYMBOLS and near(i):
                add("money", f"{_CURRENCY_SYMBOLS[nxt]} {value}", i, i + 1)
                i += 2
                continue
            if i > 0 and parts[i - 1][0] in _CURRENCY_CODES and gap(i - 1, i) in (" ", "\u00a0"):
                found.append(
                    Unit(
                        text[parts[i - 1][1] : e],
                        "money",
                        f"{parts[i - 1][0]} {value}",
                        parts[i - 1][1],
                        e,
                    )
                )
                i += 1
                continue
            # quantity: 30 Sekunden | 30秒 | 5回 | 118 cm | 250ms
            unit = _unit_word(nxt) if near(i) else None
            if unit is not None:
                if not nxt.isascii() and unit and nxt[0] in "円":
                    add("money", f"JPY {value}", i, i + 1)
                else:
                    counter = next((c for c in _CJK_COUNTERS if nxt.startswith(c)), None)
                    if counter and not nxt.isascii():
                        u_end = parts[i + 1][1] + len(counter)
                        found.append(Unit(text[s:u_end], "quantity", f"{value} {unit}", s, u_end))
                    else:
                        add("quantity", f"{value} {unit}", i, i + 1)
                i += 2
                continue
            if len(chunk) > 1 or not chunk.isdigit():  # "turn 3", "step 2": a lone digit says little
                found.append(Unit(chunk, "number", value, s, e))
            i += 1
            continue
        if kind_norm is None:
            if chunk in _CURRENCY_CODES and near(i) and number_norm(nxt) is not None:
                i += 1  # the number that follows takes the code as its currency
                continue
            # proper names: capitalised words (a run, or after a title; in German, nouns are
            # capitalised, so a single word needs a title or a neighbour)
            if _capitalised(chunk) and chunk.lower() not in _NOT_NAMES:
                j = i
                while (
                    j + 1 < n
                    and near(j)
                    and _capitalised(parts[j + 1][0])
                    and parts[j + 1][0].lower() not in _NOT_NAMES
                ):
                    j += 1
                titled = i > 0 and parts[i - 1][0].lower().rstrip(".") in _TITLES and near(i - 1)
                at_start = s in starts
                if (
                    titled
                    or (j > i and not german)
                    or (j > i and german and titled)
                    or (j == i and not german and not at_start)
                ):
                    add("name", " ".join(c[0] for c in parts[i : j + 1]), i, j)
                i = j + 1
                continue
            i += 1
            continue
        kind, norm = kind_norm
        found.append(Unit(chunk, kind, norm, s, e))
        i += 1
    found.sort(key=lambda u: (u.start, u.end))
    found = _without_header_runs(text, found)
    if ":" in text or "=" in text:
        found = _with_setting_values(text, found)
    quoted = []
    for m in _QUOTED.finditer(text):
        inner = next(g for g in m.groups() if g is not None)
        body = _WS.sub(" ", inner).strip()
        if not body or body.isdigit():
            continue
        inner_units = within(found, m.start() + 1, m.end() - 1)
        if len(inner_units) == 1 and inner_units[0].text == body:
            continue  # "pi_3Oq…" is already an identifier
        quoted.append(Unit(m.group(0), "quoted", body, m.start(), m.end()))
    if quoted:
        found = sorted(found + quoted, key=lambda u: (u.start, u.end))
    return found


# -- sentences ------------------------------------------------------------------------------------

_BOUNDARY = re.compile(r"\n|[。！？]+|[.!?]+[\"'”’)\]]*(?=\s)|[.!?]+\Z")
_CLAUSE = re.compile(r";\s|；")
_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "z.b",
        "d.h",
        "u.a",
        "bzw",
        "ca",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "nr",
        "no",
        "vs",
        "etc",
        "usw",
        "vgl",
        "inc",
        "ltd",
        "approx",
        "fig",
        "hr",
        "fr",
    ]
)


def sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans of ``text`` (trimmed), any language; every line is at least one sentence,
    and a semicolon ends a clause that counts as one ("INV-3301 must be paid by 31 May; do not
    send reminders before 15 June" is two). ``obligations`` spans are always among these."""
    return list(_clauses_cached(text)) if len(text) <= _CACHE_CHARS else _clauses(text)


def full_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans without the semicolon split (the context a clause belongs to)."""
    return list(_sentences_cached(text)) if len(text) <= _CACHE_CHARS else _sentences(text)


def clauses(text: str) -> list[tuple[int, int]]:
    """The same spans as ``sentences`` (kept as a name of its own for callers that mean clauses)."""
    return sentences(text)


@functools.lru_cache(maxsize=4096)
def _sentences_cached(text: str) -> tuple[tuple[int, int], ...]:
    return tuple(_sentences(text))


@functools.lru_cache(maxsize=4096)
def _clauses_cached(text: str) -> tuple[tuple[int, int], ...]:
    return tuple(_clauses(text))


def _clauses(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in full_sentences(text):
        start = s
        for m in _CLAUSE.finditer(text, s, e):
            _push(text, start, m.start(), out)
            start = m.end()
        _push(text, start, e, out)
    return out


def _sentences(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        mark = m.group(0)
        if mark.startswith("."):
            before = text[max(start, m.start() - 12) : m.start()]
            word = before.split()[-1].lower() if before.split() else ""
            after = text[m.end() : m.end() + 3].lstrip()
            if word in _ABBREVIATIONS or (word.isdigit() and len(word) <= 2) or (after[:1].islower()):
                continue  # e.g. | 14. April | "… and so on. then" is one sentence
        _push(text, start, m.end(), spans)
        start = m.end()
    _push(text, start, len(text), spans)
    return spans


def _push(text: str, s: int, e: int, spans: list[tuple[int, int]]) -> None:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    if s < e:
        spans.append((s, e))


# -- obligations ----------------------------------------------------------------------------------

# Negations that bind an obligation (a bare "not" elsewhere in a long sentence does not flip it).
_NEGATIVE = re.compile(
    r"(?i)\b(?:must\s+not|mustn['’]t|never|do\s+not|don['’]t|cannot|can['’]t|may\s+not|shall\s+not|"
    r"should\s+not|shouldn['’]t|will\s+not|won['’]t|not\s+allowed|forbidden|prohibited|no\s+longer|"
    r"darf\s+nicht|dürfen\s+nicht|muss\s+nicht|müssen\s+nicht|soll\s+nicht|sollen\s+nicht|nie|"
    r"niemals|keine?[nmrs]?|verboten|untersagt|"
    # French (ne … pas/jamais, interdit), Spanish (no se debe, nunca, prohibido)
    r"ne|n['’](?=\w)|jamais|interdite?s?|aucune?|"
    r"no\s+(?:se|debe|deben|debes|puede|pueden|hay|está|están|es|son)|nunca|jamás|prohibidas?|prohibidos?|"
    r"ningún|ninguna)\b"
    r"|禁止|(?:ては|では)(?:ならない|いけない|ならず)|ないこと|ないでください|ないように|不可|してはいけ"
    # Chinese (不得, 不能, 严禁…)
    r"|不得|不能|不要|严禁|切勿|不允许|不准|不应|不可以"
)
# "no more than 5" is a limit and "403 Forbidden" a status: neither negates the sentence.
_NOT_A_NEGATION = re.compile(r"(?i)\bno\s+(?:more|later|fewer|less)\s+than\b|\b[1-5]\d\d\s+forbidden\b")
_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "requirement",
        re.compile(
            r"(?i)\b(?:must|shall|required?|requires|need\s+to|needs\s+to|has\s+to|have\s+to|should|"
            r"only|until|at\s+(?:most|least)|no\s+(?:more|later)\s+than|within|always|ensure|"
            r"make\s+sure|never|muss|müssen|soll|sollen|darf|dürfen|erforderlich|"
            r"notwendig|nur|höchstens|mindestens|spätestens|innerhalb|immer|stets|nie|niemals|"
            r"verboten|untersagt|forbidden|prohibited|deadline|"
            # French, Spanish
            r"doit|doivent|devez|devons|faut|obligatoire|exigée?|jamais|interdite?s?|seulement|"
            r"uniquement|au\s+plus\s+tard|au\s+(?:maximum|minimum|moins)|"
            r"debe|deben|debes|debemos|hay\s+que|tiene\s+que|tienen\s+que|obligatori[oa]s?|nunca|"
            r"jamás|prohibid[oa]s?|solo|sólo|únicamente|como\s+(?:máximo|mínimo)|a\s+más\s+tardar)\b"
            # "do not" as an imperative (clause start, after please/you/we), not "warnings do not change"
            r"|(?i:(?:^|(?<=[,:] )|(?<=please )|(?<=you )|(?<=we ))(?:do\s+not|don['’]t)\b)"
            r"|しなければ|なければならない|必要|必須|こと(?=[。．\s]|\Z)|禁止|まで|以内|以下|以上|常に|必ず|"
            r"てはならない|てはいけない"
            # Chinese
            r"|必须|务必|应当|应该|需要|不得|不能|不要|严禁|切勿|最多|至少|只能|仅限|之前"
        ),
    ),
    (
        "decision",
        re.compile(
            # "we will send a replacement": a commitment the team makes is a decision ("I will look
            # at the logs" is an agent's own next step, not one).
            r"(?i)\b(?:decided|decision|agreed|we(?:['’]ll|\s+will|\s+are\s+going\s+to)|going\s+with|"
            r"chose|wir\s+werden|entschieden|entscheidung|vereinbart|beschlossen|"
            r"décidé|décision|convenu|decidido|decisión|acordado|acordamos)\b"
            r"|決定|決めた|合意|ことにし(?:た|ました|ます)|决定|已决定|同意"
        ),
    ),
    (
        "approval",
        re.compile(r"(?i)\b(?:approved?|approval|sign(?:ed)?[-\s]off|genehmigt|freigegeben)\b|承認"),
    ),
    (
        "preference",
        re.compile(r"(?i)\b(?:prefers?|preferred|please|bevorzugt|bitte|wünscht)\b|希望|ください"),
    ),
    (
        "open_item",
        re.compile(
            r"(?i)\b(?:todo|fixme|open\s+question|pending|blocked|follow[-\s]up|still\s+need|tbd|"
            r"unresolved|offen|ausstehend|noch\s+zu)\b|未解決|保留|確認中|要確認"
        ),
    ),
)


def polarity(sentence: str) -> str:
    """``negative`` when the sentence forbids or negates (never, must not, darf nicht, 禁止…)."""
    cleaned = _NOT_A_NEGATION.sub(" ", sentence)
    return "negative" if _NEGATIVE.search(cleaned) else "positive"


def obligations(text: str) -> list[Obligation]:
    """The sentences of ``text`` that carry an obligation, decision, approval, preference or open
    item, each with its polarity, its cue and the salient units inside it."""
    if not text:
        return []
    found = units(text)
    out = []
    for s, e in clauses(text):
        sentence = text[s:e]
        if len(sentence) > 4 * MAX_CHUNK and not _CUES[0][1].search(sentence[:2000]):
            continue
        for kind, cue_pattern in _CUES:
            m = cue_pattern.search(sentence)
            if m:
                inside = tuple(within(found, s, e))
                out.append(Obligation(sentence, s, e, polarity(sentence), m.group(0), inside, kind))
                break
    return out


# -- matching -------------------------------------------------------------------------------------

# Kinds whose values compare by norm (a number is the same number however it is written).
VALUE_KINDS = frozenset({"number", "money", "quantity", "date", "time"})


def values(found: list[Unit]) -> set[str]:
    """The comparable values of ``found``: norms, plus the bare number of every money/quantity."""
    out = set()
    for u in found:
        out.add(u.norm)
        if u.kind in ("money", "quantity"):
            out.add(u.norm.split(" ")[1] if u.kind == "money" else u.norm.split(" ")[0])
        if u.kind == "date" and "T" in u.norm:
            out.update(u.norm.split("T"))
    return out


def contains(haystack_units: list[Unit], haystack_text: str, unit: Unit) -> bool:
    """Whether a text (its units and its raw text) states ``unit``."""
    norms = {u.norm for u in haystack_units}
    if unit.norm in norms:
        return True
    if unit.kind == "number":
        if len(unit.norm) == 1:  # a setting's "6" restated as a lone digit, which no unit holds
            return any(m.group() == unit.norm for m in _LONE_DIGIT.finditer(haystack_text))
        return unit.norm in values(haystack_units)
    if unit.kind == "date" and "T" in unit.norm:  # 2026-03-14T09:12 kept as "2026-03-14 at 09:12:44Z"
        day, hhmm = unit.norm.split("T")
        return day in values(haystack_units) and hhmm in haystack_text
    if unit.kind == "money":  # 1.250,00 EUR from a CSV row: the value and its currency, side by side
        code, value = unit.norm.split(" ", 1)
        return value in values(haystack_units) and (code in haystack_text or unit.text[0] in haystack_text)
    if unit.kind in ("quantity", "date", "time"):
        return False
    if unit.kind == "path" and any(
        u.kind == "path" and (unit.text.endswith("/" + u.text) or u.text.endswith("/" + unit.text))
        for u in haystack_units
    ):
        return True  # a/payments/retry.py (diff header) kept as payments/retry.py
    if unit.kind == "path" and ":" in unit.text:  # refunds.py:142 kept as "refunds.py line 142"
        file, _, line = unit.text.partition(":")
        return file in haystack_text and line.split(":")[0] in values(haystack_units)
    if unit.kind in ("name", "quoted"):
        return unit.norm.casefold() in _WS.sub(" ", haystack_text).casefold()
    return unit.text in haystack_text
