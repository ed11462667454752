"""Workflow create accepts ``source`` (which integration feeds it) and reports it back."""

from __future__ import annotations

import pytest

from memoryhub.models import Workflow

pytestmark = pytest.mark.django_db


def test_create_with_a_source_stores_and_returns_it(api):
    response = api.post("/api/v1/workflows/", {"external_id": "lc-1", "source": "langchain"}, format="json")
    assert response.status_code == 201 and response.json()["source"] == "langchain"
    assert Workflow.objects.get(external_id="lc-1").source == "langchain"
    # Default stays "api".
    assert api.post("/api/v1/workflows/", {"external_id": "plain"}, format="json").json()["source"] == "api"


def test_an_unknown_source_is_a_400_and_writes_nothing(api):
    response = api.post("/api/v1/workflows/", {"external_id": "x-1", "source": "crewai"}, format="json")
    assert response.status_code == 400 and response.json()["error"]
    assert not Workflow.objects.filter(external_id="x-1").exists()
