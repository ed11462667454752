"""README's speed figures say what their numbers say: the HTTP table's verdict and rounded
figures follow from the table and the benchmark's targets, and the overview's ratio is its two
timings divided, judged against the benchmark's targets, and so are the other two pages'. A figure edited on
one side only, or a target changed in the code, fails here."""

from __future__ import annotations

import re
from pathlib import Path

from memoryhub.bench import http, scale

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
NAMES = {"trigger": "decision", "context": "read", "activation": "activation"}


def _row(label: str) -> list[float]:
    line = next(line for line in README.splitlines() if line.startswith(f"| {label} |"))
    return [float(v) for v in re.findall(r"([\d.]+) ms", line)]


def test_the_http_table_its_verdict_and_its_targets_agree():
    measured = dict(
        zip(
            http.TARGETS_P50_MS,
            _row("HTTP, production settings (persistent connections, Redis cache)"),
            strict=True,
        )
    )
    targets = re.search(
        r"p50 ≤ ([\d.]+) ms \(decision\), ≤ ([\d.]+) ms \(context read\), ≤ ([\d.]+) ms \(activation\)",
        README,
    )
    assert targets is not None
    assert [float(t) for t in targets.groups()] == list(http.TARGETS_P50_MS.values())
    met = all(measured[name] <= target for name, target in http.TARGETS_P50_MS.items())
    assert ("The targets are **met**" in README) == met
    assert ("The targets are **not met**" in README) == (not met)
    for name, word in NAMES.items():  # the prose rounds the table, against the code's target
        stated = re.search(rf"the\s+{word}\s+(?:is\s+)?([\d.]+)(?:\s+ms)?\s+against\s+([\d.]+)", README)
        assert stated is not None, word
        assert float(stated.group(1)) == round(measured[name], 1), word
        assert float(stated.group(2)) == http.TARGETS_P50_MS[name], word


def test_the_overview_ratio_is_its_two_timings_divided_and_judged_against_both_targets():
    line = next(line for line in README.splitlines() if line.startswith("| overview page (7-day window)"))
    found = re.search(r"([\d.]+) vs ([\d.]+) ms, \*\*([\d.]+)×\*\*", line)
    assert found is not None
    big, empty, ratio = (float(v) for v in found.groups())
    assert ratio == round(big / empty, 2)
    assert scale.PAGE_RATIO_MAX["overview"] == 1.5  # the target the line names
    assert ("**within the 1.5× goal**" in line) == (ratio <= 1.5)
    assert ("**not the 1.5× goal**" in line) == (ratio > 1.5)
    for page, label in (("workflow_list", "workflow list page"), ("workflow_detail", "workflow page")):
        row = next(line for line in README.splitlines() if line.startswith(f"| {label},"))
        found = re.search(r"([\d.]+) vs ([\d.]+) ms, \*\*([\d.]+)×\*\*", row)
        assert found is not None, label
        big, empty, ratio = (float(v) for v in found.groups())
        assert abs(ratio - big / empty) < 0.01, label  # the bench divides the unrounded times
        assert f"≤ {scale.PAGE_RATIO_MAX[page]:g}×" in row and ratio <= scale.PAGE_RATIO_MAX[page], label
