"""`manage.py bench quality` on a small labelled corpus: the targets' VALUES, not just their keys.

The full run (50 workflows x 4 versions, 9 genres) is `manage.py bench quality --check`; here two
workflows are enough to hold the default compactor to the same thresholds in seconds.
"""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memoryhub.bench import corpus
from memoryhub.bench import quality as bench
from memoryhub.memory import validation

COMPACTOR_TARGETS = (
    "compression_min",
    "obligations_kept_min",
    "units_kept_or_declared_min",
    "silent_loss_max",
    "versions_over_budget_max",
)
VALIDATOR_TARGETS = ("validator_recall_min", "false_rejections_max", "mutation_catch_min")


@pytest.fixture(scope="module")
def small() -> dict:
    result = bench.run_size(400, per_workflow=200, log=lambda _m: None)
    result["targets_met"] = bench.check_targets(result)
    return result


def test_labels_are_written_by_the_generator_for_every_genre():
    wf = corpus.generate(0, 200)
    genres = {label.genre for label in wf.labels}
    assert genres == set(corpus.GENRES) and len(genres) >= 8
    for label in wf.labels:
        source = wf.events[label.seq - 1].content
        # Each label is exactly what was written into its event.
        if label.kind == "unit":
            assert label.text in source, label
        else:
            assert label.text in source and label.cue in label.text, label
            assert all(u in label.text for u in label.units), label


@pytest.mark.parametrize("target", COMPACTOR_TARGETS)
def test_the_default_compactor_meets_its_target(small, target):
    t = small["targets_met"][target]
    assert t["met"], (target, t)
    assert t["value"] is not None


def test_every_compactor_is_measured_on_every_version_the_same_way(small):
    assert small["versions_per_workflow"] >= 4
    for name, row in small["compactors"].items():
        assert row["versions"] == small["workflows"] * small["versions_per_workflow"], name
        assert row["units"] > 0 and row["obligations"] > 0
        assert row["compression"] == round(row["source_tokens"] / row["summary_tokens"], 2)
    ours = small["compactors"][bench.DEFAULT_COMPACTOR]
    # The baselines really lose what v3 keeps or declares (so the measure can tell them apart).
    for name in ("extractive-v2", "extractive-v1", "langchain-sectioned"):
        assert small["compactors"][name]["silent_loss"] > ours["silent_loss"] + 0.2, name


def test_the_newest_validator_meets_its_targets(small):
    assert small["validator"]["version"] == validation.VALIDATOR_VERSIONS[-1] == "rules-8"
    missed = {k: small["targets_met"][k] for k in VALIDATOR_TARGETS if not small["targets_met"][k]["met"]}
    assert not missed
    # every kind of mutation was tried and caught, and the silent losses were real removals
    by_kind = small["validator"]["mutation_catch_by_kind"]
    assert set(by_kind) == set(bench.MUTATIONS) and all(v is not None and v >= 0.99 for v in by_kind.values())
    assert small["validator"]["silent_losses"] >= 4 and small["validator"]["declared_drops"] >= 4


def test_check_targets_compares_values(small):
    worse = {**small, "compactors": dict(small["compactors"])}
    worse["compactors"][bench.DEFAULT_COMPACTOR] = {
        **small["compactors"][bench.DEFAULT_COMPACTOR],
        "silent_loss": 0.5,
        "compression": 4.9,
    }
    met = bench.check_targets(worse)
    assert not met["silent_loss_max"]["met"] and not met["compression_min"]["met"]


def test_bench_quality_check_exits_non_zero_when_a_target_is_missed(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    out = StringIO()
    # 200 events: one workflow, 4 summaries, far below the 200 good summaries the targets ask for.
    with pytest.raises(CommandError, match="good_summaries_min"):
        call_command("bench", "quality", "--quality-sizes", "200", "--check", stdout=out)
    assert "| extractive-v3 |" in out.getvalue()
    assert list((tmp_path / "bench").glob("bench-*.json"))


def test_readme_quality_table_names_its_command_and_meets_the_targets():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("<!-- quality-table -->")[1]
    assert "manage.py bench quality --check" in section
    row = re.search(
        r"^\| extractive-v3 \| ([\d.]+)% \| ([\d.]+)% \| ([\d.]+)% \| ([\d.]+)% \| ([\d.]+)× \| 0/",
        section,
        re.M,
    )
    assert row, "README lacks the extractive-v3 row"
    obligations, kept, declared, silent, compression = (float(g) for g in row.groups())
    validator = re.search(
        r"^validator (rules-\d+): false rejections \d+/\d+ \(([\d.]+)%\); silent losses caught \d+/\d+ "
        r"\(([\d.]+)%\); mutations caught \d+/\d+ \(([\d.]+)%",
        section,
        re.M,
    )
    assert validator, "README lacks the validator line"
    assert validator.group(1) == validation.VALIDATOR_VERSIONS[-1]
    false_rejections, recall, catch = (float(g) / 100 for g in validator.groups()[1:])
    assert false_rejections <= bench.TARGETS["false_rejections_max"]
    assert recall >= bench.TARGETS["validator_recall_min"]
    assert catch >= bench.TARGETS["mutation_catch_min"]
    assert obligations / 100 >= bench.TARGETS["obligations_kept_min"]
    assert (kept + declared) / 100 >= bench.TARGETS["units_kept_or_declared_min"]
    assert silent / 100 <= bench.TARGETS["silent_loss_max"]
    assert compression >= bench.TARGETS["compression_min"]


def test_the_fake_model_paraphrases_some_api_names_deterministically():
    model = bench.FakeSectionModel()
    words = [
        f"create{w.capitalize()}Item" for w in ("ledger", "refund", "invoice", "payout", "webhook", "quota")
    ]
    once = [model._paraphrase(w) for w in words]
    assert once == [model._paraphrase(w) for w in words]
    assert any("_" in w for w in once) and any("_" not in w for w in once)
