"""Regex investigations cannot be used for denial of service.

Patterns run on RE2 (linear in the text): a pattern that makes a backtracking engine run for
ever answers at once. Constructs RE2 refuses (backreferences, lookaround) are a 400. The whole
event search of a regex investigation, PostgreSQL prefilter included, has a time budget; past
it the answer is a 400 and nothing is written. (Timings on a 1M-event workflow are in
``manage.py bench`` → scale, not here.)
"""

from __future__ import annotations

import multiprocessing

import pytest
from django.db import connection

from audit.investigate import investigate, make_matcher
from audit.models import AuditEntry, Investigation
from memoryhub.core.actors import Actor
from memoryhub.core.errors import InvalidInput
from memoryhub.memory.search import SearchTooExpensive, candidate_seqs
from tests.factories import append_n

ACTOR = Actor.user("bob")
# Catastrophic backtracking for a backtracking engine (Python's re, PCRE): nested quantifiers
# that fail at the end of a long run of 'a's.
PATHOLOGICAL = ["(a+)+$", "^(a|a)*b", "(a|aa)+$", "(.*a){12}$", "^(\\w+\\s?)*$"]
HOSTILE_TEXT = "a" * 1_000_000 + "!"


def _match_all(queue) -> None:
    queue.put([make_matcher(p, regex=True)(HOSTILE_TEXT) for p in PATHOLOGICAL])


def test_pathological_patterns_run_in_linear_time_on_a_large_text():
    """Run in a child process so a backtracking engine would be killed, not hang the suite: with
    Python's re each of these takes longer than the age of the universe; RE2 is done at once."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_match_all, args=(queue,))
    child.start()
    child.join(60)  # a liveness bound, not a timing assertion
    alive = child.is_alive()
    if alive:
        child.kill()
        child.join()
    assert not alive, "a pathological pattern did not finish: the regex engine backtracks"
    assert queue.get(timeout=5) == [False, False, False, False, False]


@pytest.mark.parametrize("pattern", [r"(a)\1", r"foo(?=bar)", r"(?<!x)y", r"a{1001}"])
def test_patterns_needing_backtracking_or_huge_programs_are_a_400(pattern):
    with pytest.raises(InvalidInput) as exc:
        make_matcher(pattern, regex=True)
    assert exc.value.code == "invalid_regex"


def test_regex_keeps_its_meaning(incident):
    match = make_matcher(r"40[13]\s+UNAUTH\w+", regex=True)
    assert match("got a 401   unauthorized back") and not match("got a 402 unauthorized")


def test_api_answers_a_pathological_pattern(bob, incident):
    response = bob.api.post(
        f"/api/v1/artifacts/{incident.artifact.artifact_id}/investigate/",
        {"fact": "(a+)+$", "regex": True},
        format="json",
    )
    assert response.status_code in (200, 201), response.content
    response = bob.api.post(
        f"/api/v1/artifacts/{incident.artifact.artifact_id}/investigate/",
        {"fact": r"(401)\1", "regex": True},
        format="json",
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_regex"


def test_a_spent_search_budget_is_a_400_and_writes_nothing(incident, settings):
    settings.MEMORYHUB_REGEX_SEARCH_SECONDS = 0
    investigations, audit_rows = Investigation.objects.count(), AuditEntry.objects.count()
    with pytest.raises(InvalidInput) as exc:
        investigate(incident.artifact, "unauth\\w+", ACTOR, regex=True)
    assert exc.value.code == "regex_too_expensive"
    assert Investigation.objects.count() == investigations and AuditEntry.objects.count() == audit_rows
    # Plain-text investigations are not bounded by the regex budget.
    assert investigate(incident.artifact, "401 Unauthorized", ACTOR).verdict == "compaction_omission"


@pytest.mark.postgres
def test_postgres_regex_prefilter_is_cancelled_at_its_budget(tenant):
    """PostgreSQL's regex engine is not linear for every pattern: the prefilter query runs under
    a transaction-local statement_timeout, and a cancelled query is SearchTooExpensive, never a
    silent fall back to scanning everything."""
    from tests.factories import make_workflow

    wf = make_workflow(tenant, "big-regex")
    append_n(wf, 3000)
    with pytest.raises(SearchTooExpensive):
        candidate_seqs(wf.pk, "(.*a){20}(.*b){20}", regex=True, from_seq=1, to_seq=None, timeout=0.001)
    # The timeout was local to the search: the connection's setting is untouched.
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
    assert candidate_seqs(wf.pk, "number 2999 ", regex=True, from_seq=1, to_seq=None, timeout=5) == [2999]
