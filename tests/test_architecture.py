"""The layers in docs/ARCHITECTURE.md are contracts: an import that points up or closes a cycle
fails the suite (and so CI), not only `make lint`.

The contracts are read from pyproject.toml's [tool.importlinter] and checked in process on
grimp's import graph (the same graph `lint-imports` builds), so a test can also add a forbidden
import to a copy of the graph and watch the contract break.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import importlinter.configuration
import pytest
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import Contract

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACT_TYPES = {
    "layers": LayersContract,
    "forbidden": ForbiddenContract,
    "acyclic_siblings": AcyclicSiblingsContract,
}

importlinter.configuration.configure()


def _contract(kind: str) -> Contract:
    (options,) = [c for c in CONFIG["contracts"] if c["type"] == kind]
    contract_options = {
        key: value if isinstance(value, list) else str(value)
        for key, value in options.items()
        if key not in ("name", "type")
    }
    return CONTRACT_TYPES[kind](options["name"], {"root_packages": CONFIG["root_packages"]}, contract_options)


@pytest.fixture
def graph() -> grimp.ImportGraph:
    # Built from the source tree; each test gets its own so an added import stays local to it.
    return grimp.build_graph(*CONFIG["root_packages"], exclude_type_checking_imports=True, cache_dir=None)


@pytest.mark.parametrize("kind", sorted(CONTRACT_TYPES))
def test_the_code_keeps_every_contract(graph, kind):
    check = _contract(kind).check(graph, verbose=False)
    assert check.kept, check.metadata


@pytest.mark.parametrize(
    "importer, imported",
    [
        ("memoryhub.core.canonical", "memoryhub.models"),  # a primitive reaching for a model
        ("memoryhub.memory.lifecycle", "audit.purge"),  # the domain reaching for governance
        ("memoryhub.accounts.tenancy", "memoryhub.observe.metrics"),  # the domain reaching for reports
        ("audit.content", "memoryhub.web.views.base"),  # governance reaching for delivery
        ("memoryhub.compaction.base", "memoryhub.memory.events"),  # a pure compactor reaching for Django
        ("memoryhub.pipeline.jobs", "memoryhub.tasks.compaction"),  # the domain reaching for a Celery task
        ("memoryhub.observe.alerting.deliver", "memoryhub.tasks.alerting"),  # reports reaching for a task
        ("audit.sequencer", "audit.review"),  # the ledger reaching for governance
    ],
)
def test_an_upward_import_breaks_the_layers(graph, importer, imported):
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import")
    assert not _contract("layers").check(graph, verbose=False).kept


@pytest.mark.parametrize(
    "importer, imported",
    [
        ("memoryhub.models.purgeable", "audit.payloads"),  # a model storing its payload through the app
        ("memoryhub.models.workflows", "triggers.models"),  # a model reaching for the policy rows
        ("memoryhub.core.redaction", "audit.log"),  # a primitive reaching for the audit log
        ("memoryhub.compaction.base", "triggers.engine"),  # a pure compactor reaching for policy arithmetic
    ],
)
def test_an_import_of_the_apps_below_the_domain_breaks_the_forbidden_contract(graph, importer, imported):
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import")
    assert not _contract("forbidden").check(graph, verbose=False).kept


@pytest.mark.parametrize(
    "importer, imported",
    [
        ("memoryhub.memory.events", "memoryhub.pipeline.jobs"),  # jobs already import the memory domain
        ("memoryhub.compaction.base", "memoryhub.compaction.extractive"),  # a base importing its plug-ins
    ],
)
def test_a_cycle_between_siblings_breaks_the_acyclic_contract(graph, importer, imported):
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import")
    assert not _contract("acyclic_siblings").check(graph, verbose=False).kept


# Wiring, in no layer: app configs, settings, the WSGI entry point and migrations.
OUTSIDE_THE_LAYERS = {"apps", "settings", "settings_test", "wsgi", "migrations"}


def test_every_module_sits_in_a_layer():
    """import-linter's own ``exhaustive`` needs containers (see pyproject.toml), so: every module
    or package directly under a root package is named by a layer, or is wiring."""
    (options,) = [c for c in CONFIG["contracts"] if c["type"] == "layers"]
    declared = {name.strip() for layer in options["layers"] for name in layer.replace("|", ":").split(":")}
    undeclared = [
        f"{root}.{path.stem}"
        for root in CONFIG["root_packages"]
        for path in sorted((ROOT / root).iterdir())
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
        if f"{root}.{path.stem}" not in declared and path.stem not in OUTSIDE_THE_LAYERS
    ]
    assert not undeclared, f"add these to a layer in pyproject.toml: {undeclared}"


def test_the_architecture_diagram_names_every_layer_module():
    """docs/ARCHITECTURE.md's diagram lists each module of the layers contract: in full, or by its
    last part after its app's first entry ("audit.views, views_retention, …")."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    diagram = doc.split("### Layers", 1)[1].split("```")[1]
    words = set(re.findall(r"[\w.]+", diagram))
    (options,) = [c for c in CONFIG["contracts"] if c["type"] == "layers"]
    missing = [
        name
        for layer in options["layers"]
        for name in (part.strip() for part in layer.replace("|", ":").split(":"))
        if name not in words
        and not (name.rpartition(".")[2] in words and f"{name.split('.')[0]}." in diagram)
    ]
    assert not missing, f"docs/ARCHITECTURE.md's layer diagram omits {missing}"


def test_no_module_uses_a_pre_restructuring_path():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "rewrite_imports.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
