"""Every compiled pattern of memoryhub.core.salient runs in linear time on hostile input.

Enumerates the module's patterns (a new one is timed without being listed here) and runs each
over 100k-character inputs built to make backtracking regexes go quadratic; the whole extractor
(units, sentences, obligations) is timed on the same inputs.
"""

from __future__ import annotations

import re
import time

import pytest
import regex

from memoryhub.core import mutations, quality, salient, verdicts

N = 100_000
HOSTILE = {
    "digits": "1" * N,
    "digit-dots": "1." * (N // 2),
    "digit-commas": "1,2" * (N // 3),
    "word-dots": "ab." * (N // 3),
    "slashes": "a/" * (N // 2),
    "dashes": "A1-" * (N // 3),
    "underscores": "a_" * (N // 2),
    "at-signs": "a.a@" * (N // 4),
    "quotes": '"a' * (N // 2),
    "single-quotes": " 'ab" * (N // 4),
    "capitals": "Ab " * (N // 3),
    "cjk": "30秒" * (N // 3),
    "spaces-digits": "1 " * (N // 2),
    "one-long-token": "x" * 60_000 + " 401 " + "y1" * 20_000,
    "periods": ". " * (N // 2),
    "mixed": "pi_3Oq-x.y:z/" * (N // 13),
    "thousands": "1.000" * (N // 5),
    "camel": "aB" * (N // 2),
    "constant": "A_" * (N // 2),
    "header": "Ab-" * (N // 3),
    "negations": "not " * (N // 4),
    "at-words": "a@" * (N // 2),
    "truncated": "x_" * (N // 2) + "…",
}
_PATTERN_TYPES = (re.Pattern, type(regex.compile("x")))


def _patterns() -> dict[str, re.Pattern[str]]:
    """Every compiled pattern of the modules that read user and event text (the extractor, the
    verdicts, the mutation engine and the legacy extractor extractive-v2 keeps), also those kept
    in tuples (cue and flip tables)."""
    found = {}
    for module in (salient, verdicts, mutations, quality):
        prefix = module.__name__.rsplit(".", 1)[-1]
        for name, value in vars(module).items():
            if isinstance(value, _PATTERN_TYPES):
                found[f"{prefix}.{name}"] = value
            elif isinstance(value, tuple):
                for i, item in enumerate(value):
                    inner = (
                        item[0] if isinstance(item, tuple) and isinstance(item[0], _PATTERN_TYPES) else item
                    )
                    inner = (
                        item[-1]
                        if isinstance(item, tuple) and not isinstance(inner, _PATTERN_TYPES)
                        else inner
                    )
                    if isinstance(inner, _PATTERN_TYPES):
                        found[f"{prefix}.{name}[{i}]"] = inner
    return found


PATTERNS = _patterns()
# A quadratic pattern on 100k characters takes minutes; a linear one milliseconds, but a shared
# 2-core machine under load once took 2.6 s: the budget leaves that slack.
BUDGET_S = 5.0


def test_the_module_has_patterns_to_time():
    assert len(PATTERNS) >= 40 and any(name.startswith("quality._PATH") for name in PATTERNS)


@pytest.mark.parametrize("pattern_name", sorted(PATTERNS))
def test_each_pattern_is_linear_on_hostile_input(pattern_name):
    pattern = PATTERNS[pattern_name]
    for label, text in HOSTILE.items():
        began = time.process_time()
        for _ in pattern.finditer(text):
            pass
        pattern.match(text)
        took = time.process_time() - began
        assert took < BUDGET_S, f"{pattern_name} took {took:.2f}s on {label}"


@pytest.mark.parametrize("label", sorted(HOSTILE))
def test_the_extractor_is_linear_on_hostile_input(label):
    text = HOSTILE[label]
    began = time.process_time()
    salient.units(text + " ")  # uncached (long text)
    salient.obligations("You must keep this. " + text)
    took = time.process_time() - began
    assert took < 4 * BUDGET_S, f"extractor took {took:.2f}s on {label}"
