"""Schema fuzzing: schemathesis generates requests for every operation in /api/schema/ and sends
them, with an acme admin API key, to the Django WSGI app holding the seed scenario (see
world.py). Every response must not be a server error and must conform to the schema: a
documented status code, the documented content type, a body matching the documented schema.
Two checks of our own ride along: an id of another tenant's object in the path is a 404, and no
response carries another tenant's data.

Bounded and repeatable: derandomized Hypothesis, ``MAX_EXAMPLES`` random cases per operation on
top of the deterministic coverage cases, no deadline. Every operation is fuzzed, purge and deletes included: each operation runs in
its own savepoint, so nothing it destroys is missing for the next one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from django.core.cache import cache
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from memoryhub.models import (
    AlertRule,
    Artifact,
    Channel,
    CompactionJob,
    ConsumerTrace,
    Summary,
    Workflow,
)
from tests.hardening.wsgi import InTransactionWSGI

MAX_EXAMPLES = 10

# The schema exactly as clients get it: loaded through the WSGI app at import time (it needs no
# database and no credentials).
schema = schemathesis.openapi.from_wsgi("/api/schema/", InTransactionWSGI())
# Phases: the schema's examples; coverage (each field's boundaries and each wrong type once, which
# is where the 500s were); then MAX_EXAMPLES random positive and negative cases per operation.

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


# --- realistic path parameters --------------------------------------------------------------------

# Path parameter -> the model rows its values name (both tenants: globex ids must be 404s).
_LOOKUPS: dict[str, Any] = {
    "wf": lambda: Workflow.objects.values_list("external_id", "tenant__slug"),
    "summary_id": lambda: Summary.objects.values_list("summary_id", "workflow__tenant__slug"),
    "job_id": lambda: CompactionJob.objects.values_list("pk", "tenant__slug"),
    "trace_id": lambda: ConsumerTrace.objects.values_list("pk", "tenant__slug"),
    "artifact_id": lambda: Artifact.objects.values_list("artifact_id", "tenant__slug"),
}


# Snapshot per test: Hypothesis needs the same choices to draw the same values, even after an
# example deleted a rule or a channel.
_KNOWN: dict[tuple[str, str], list[tuple[Any, str]]] = {}


def _ids(operation_path: str, name: str) -> list[tuple[Any, str]]:
    """(value, tenant slug) of every object the path parameter can name, in a stable order."""
    key = (operation_path, name)
    if key not in _KNOWN:
        if name == "id":  # alert-rules/{id} or channels/{id}
            model = AlertRule if operation_path.startswith("/api/v1/alert-rules/") else Channel
            rows = list(model.objects.values_list("pk", "tenant__slug"))
        else:
            lookup = _LOOKUPS.get(name)
            rows = list(lookup()) if lookup else []
        _KNOWN[key] = sorted(rows, key=lambda row: str(row[0]))
    return _KNOWN[key]


@pytest.fixture(autouse=True)
def _fresh_snapshot():
    _KNOWN.clear()


@schema.hook
def flatmap_path_parameters(ctx, path_parameters):
    """Mostly real ids (acme's and globex's), sometimes whatever Hypothesis generated."""
    if not path_parameters:
        return st.just(path_parameters)
    choices = {}
    for name, generated in path_parameters.items():
        known = [value for value, _ in _ids(ctx.operation.path, name)]
        choices[name] = st.sampled_from([*known, generated]) if known else st.just(generated)
    return st.fixed_dictionaries(choices)


# --- checks of our own ----------------------------------------------------------------------------


def _foreign_markers(world) -> set[str]:
    """Identifiers only globex has (strings a leaking acme response would contain)."""
    theirs, mine = world.theirs, world.mine
    markers = set(theirs.workflows) - set(mine.workflows)
    markers |= set(theirs.summary_ids) | set(theirs.purge_ids)
    markers |= set(theirs.artifact_ids) - set(mine.artifact_ids)
    markers |= {"gx-call-1", "gx-run-1", "hooks.example.com/globex"}
    return markers


def _sent(case) -> str:
    parts = [case.formatted_path, json.dumps(case.path_parameters or {}, default=str)]
    parts.append(json.dumps(case.query or {}, default=str))
    if case.body is not None and not isinstance(case.body, bytes | str):
        parts.append(json.dumps(case.body, default=str))
    else:
        parts.append(str(case.body))
    return " ".join(parts)


def _foreign_path_params(case, world) -> dict[str, Any]:
    """Path parameters naming a globex object (and no acme object), with a value naming nothing."""
    nowhere = {}
    for name, value in (case.path_parameters or {}).items():
        owners = {slug for v, slug in _ids(case.operation.path, name) if str(v) == str(value)}
        if owners == {world.globex.slug}:
            nowhere[name] = 987654321 if isinstance(value, int) else f"h9-nothing-{name}"
    return nowhere


def _error_code(response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("error") if isinstance(body, dict) else None


# --- the test -------------------------------------------------------------------------------------


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case, w):
    # Throttle counters (purge: 10/min) are reset before each call: the fuzzer exercises the
    # handlers, tests/memoryhub/test_limits.py exercises the throttles.
    auth = {"Authorization": f"Bearer {w.parties['alice'].key.secret}"}
    cache.clear()
    response = case.call(headers=auth)
    case.validate_response(response, checks=CHECKS)
    sent = _sent(case)

    nowhere = _foreign_path_params(case, w)
    if nowhere:
        # Another tenant's object must be indistinguishable from no object at all.
        foreign = dict(case.path_parameters)
        case.path_parameters = {**foreign, **nowhere}
        cache.clear()
        twin = case.call(headers=auth)
        case.path_parameters = foreign
        assert (response.status_code, _error_code(response)) == (twin.status_code, _error_code(twin)), (
            f"{case.operation.label} answers another tenant's {sorted(nowhere)} {foreign} with "
            f"{response.status_code} {response.text[:200]} but a missing one with "
            f"{twin.status_code} {twin.text[:200]}"
        )
    leaked = sorted(m for m in _foreign_markers(w) if m in response.text and m not in sent)
    assert not leaked, f"{case.operation.label} showed another tenant's {leaked}: {response.text[:300]}"


# --- PostgreSQL: text it cannot store ---------------------------------------------------------------

# PostgreSQL refuses NUL in text where SQLite stores it, so the same requests can pass on one and
# fail on the other: every read operation again, with a NUL appended to each generated query
# value and string path id. All must be 4xx JSON errors or 2xx, never a server error (this found
# the 500s on /api/v1/alerts/ and /api/v1/audit/). tests/hardening/test_hostile_input.py sweeps
# request bodies with hostile values on both databases.
nul_schema = schemathesis.openapi.from_wsgi("/api/schema/", InTransactionWSGI()).include(method="GET")


def _with_nul(values: dict[str, Any] | None) -> dict[str, Any]:
    """Every value as text with a NUL appended (a list: each item)."""
    out: dict[str, Any] = {}
    for key, value in (values or {}).items():
        if isinstance(value, list):
            out[key] = [f"{v}\x00" for v in value] or ["\x00"]
        else:  # query strings and path segments are text whatever the schema's type
            out[key] = f"{value}\x00"
    return out


@pytest.mark.slow
@pytest.mark.postgres
@nul_schema.parametrize()
@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_nul_in_queries_and_path_ids_is_never_a_server_error_on_postgres(case, w):
    case.query = _with_nul(case.query) or {"search": "\x00"}
    case.path_parameters = _with_nul(case.path_parameters)
    cache.clear()
    response = case.call(headers={"Authorization": f"Bearer {w.parties['alice'].key.secret}"})
    case.validate_response(response, checks=[not_a_server_error])
    assert 200 <= response.status_code < 500 and _error_code(response) == "invalid_text", (
        f"{case.operation.label} {case.query} {case.path_parameters}: {response.status_code} {response.text[:200]}"
    )
