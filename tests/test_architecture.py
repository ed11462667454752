"""The layers in docs/ARCHITECTURE.md are contracts: an import that points up or closes a cycle
fails the suite (and so CI), not only `make lint`.

The contracts are read from pyproject.toml's [tool.importlinter] and checked in process on
grimp's import graph (the same graph `lint-imports` builds), so a test can also add a forbidden
import to a copy of the graph and watch the contract break.
"""

import ast
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


# --- tests reach states through the services --------------------------------------------------

TESTS = ROOT / "tests"
ORM_WRITES = {"create", "bulk_create", "get_or_create", "update_or_create", "update", "bulk_update", "delete"}
# Rollups are a cache of counts: tests remove them to compare the rolled-up and live answers.
CACHE_MODELS = {"MetricSample"}


def _domain_models() -> set[str]:
    from django.apps import apps  # the app registry is ready only once pytest-django set Django up

    return {
        model.__name__
        for model in apps.get_models()
        if model._meta.app_label in ("memoryhub", "audit", "triggers")
    } - CACHE_MODELS


def _is_impossible_state_mark(node: ast.expr, marks: set[str]) -> bool:
    """``pytest.mark.impossible_state(...)``, or a module-level name bound to one."""
    if isinstance(node, ast.Name):
        return node.id in marks
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "impossible_state"
    )


def _receiver_model(call: ast.Call) -> str | None:
    """``Summary`` for ``Summary.objects.filter(...).update(...)`` and the like."""
    node: ast.expr = call.func
    while isinstance(node, ast.Attribute | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
        if isinstance(node, ast.Attribute) and node.attr in ("objects", "_base_manager"):
            return node.value.id if isinstance(node.value, ast.Name) else None
    return None


def _direct_writes(func: ast.FunctionDef, models: set[str]) -> list[str]:
    """The direct state writes in ``func`` outside a ``pytest.raises`` block (a refused write is
    the subject of a guard test, not a state): ORM writes on domain models, ``.save()``, a
    ``status`` written by any of them, raw SQL that sets a status, ``…_bypassing_services`` calls."""
    refused: set[int] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.With) and any(
            isinstance(item.context_expr, ast.Call) and ast.unparse(item.context_expr.func) == "pytest.raises"
            for item in node.items
        ):
            refused.update(id(inner) for inner in ast.walk(node))
    found = []
    for node in ast.walk(func):
        if id(node) in refused:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            writes_status = any(k.arg == "status" for k in node.keywords)
            if (
                (name in ORM_WRITES and (_receiver_model(node) in models or writes_status))
                or name == "save"
                or name.endswith("_bypassing_services")
            ):
                found.append(f"{func.name}:{node.lineno} {ast.unparse(node.func)}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.search(r"\bSET\s+status\b", node.value, re.IGNORECASE)
        ):
            found.append(f"{func.name}:{node.lineno} raw SQL setting a status")
    return found


def _marks_in(tree: ast.Module) -> set[str]:
    """Module-level names bound to an impossible_state mark, here or imported from another test module."""
    marks = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and _is_impossible_state_mark(stmt.value, set()):
            marks |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("tests."):
            module = ROOT / (stmt.module or "").replace(".", "/")
            theirs = _marks_in(ast.parse(module.with_suffix(".py").read_text()))
            marks |= {alias.asname or alias.name for alias in stmt.names if alias.name in theirs}
    return marks


def _unmarked_state_writes(where: str, source: str, models: set[str]) -> list[str]:
    tree = ast.parse(source)
    marks = _marks_in(tree)
    module_marked = any(
        isinstance(stmt, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets)
        and any(_is_impossible_state_mark(n, marks) for n in ast.walk(stmt.value) if isinstance(n, ast.expr))
        for stmt in tree.body
    )
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    writes = {f.name: _direct_writes(f, models) for f in functions}
    # A helper or fixture of the module that writes directly taints the tests that use it.
    tainted = {name for name, found in writes.items() if found}
    grew = True
    while grew:
        grew = False
        for f in functions:
            if f.name in tainted:
                continue
            used = {n.id for n in ast.walk(f) if isinstance(n, ast.Name)} | {a.arg for a in f.args.args}
            if used & tainted:
                tainted.add(f.name)
                grew = True
    problems = []
    for f in functions:
        if not f.name.startswith("test_") or f.name not in tainted or module_marked:
            continue
        if not any(_is_impossible_state_mark(d, marks) for d in f.decorator_list):
            helpers = {n.id for n in ast.walk(f) if isinstance(n, ast.Name)} | {a.arg for a in f.args.args}
            found = writes[f.name] or sorted(helpers & tainted)
            problems.append(f"{where}::{f.name}: {found}")
    if not any(f.name.startswith("test_") for f in functions):
        # A helper module (tests/factories.py among them): no test to mark, so a builder that
        # bypasses the services says so in its name, as tests/factories.py's docstring asks.
        problems += [
            f"{where}: {w}"
            for f in functions
            if not (f.name.endswith("_bypassing_services") or f.name.startswith("imported_"))
            for w in writes[f.name]
        ]
    return problems


def test_tests_reach_states_through_the_services():
    """A test that writes rows, a status or anything a service owns directly (or uses a helper that
    does) carries ``@pytest.mark.impossible_state("why")``: every other state comes from
    tests/factories.py, built on the services — so a shortcut such as an ``activate()`` that wrote
    ``status=ACTIVE`` itself cannot hide in a test module."""
    models = _domain_models()
    problems = [
        problem
        for path in sorted(TESTS.rglob("*.py"))
        if path != Path(__file__)  # this module holds shortcuts as examples
        for problem in _unmarked_state_writes(str(path.relative_to(ROOT)), path.read_text(), models)
    ]
    assert not problems, "direct state writes without an impossible_state mark:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "source",
    [
        "def test_x(wf):\n    Summary.objects.filter(workflow=wf).update(status=SummaryStatus.ACTIVE)\n",
        "def test_x(s):\n    s.status = 'ACTIVE'\n    s.save()\n",
        "def test_x(q):\n    q.update(status='ACTIVE')\n",
        "def test_x(wf):\n    ContextPolicy.objects.create(workflow=wf, require_approval=True)\n",
        "import pytest\n@pytest.fixture\ndef wf(tenant):\n    return Workflow.objects.create(tenant=tenant)\n"
        "def test_x(wf):\n    pass\n",
        "def test_x(cur):\n    cur.execute(\"UPDATE memoryhub_summary SET status = 'ACTIVE'\")\n",
    ],
)
def test_the_state_write_check_catches_a_shortcut_in_a_test(source):
    models = _domain_models()
    assert _unmarked_state_writes("example", source, models)
    marked = "import pytest\n" + source.replace(
        "def test_x", '@pytest.mark.impossible_state("why")\ndef test_x'
    )
    assert not _unmarked_state_writes("example", marked, models)


def test_the_state_write_check_catches_a_factory_that_writes_the_status():
    # The shortcut that started this check: a factory "activating" by writing ACTIVE itself.
    source = (
        "def activate(summary):\n"
        "    Summary.objects.filter(pk=summary.pk).update(status=SummaryStatus.ACTIVE)\n"
        "    return summary\n"
    )
    assert _unmarked_state_writes("factories", source, _domain_models())
    named = source.replace("def activate", "def activation_bypassing_services")
    assert not _unmarked_state_writes("factories", named, _domain_models())
