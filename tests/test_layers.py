"""Imports between sitssim modules point down the layers (docs: ARCHITECTURE.md, "Layers").

The graph is read from the source with ``ast``, not from ``sys.modules``, so it counts
every import statement wherever it sits: module level, deferred inside a function, and
under ``if TYPE_CHECKING:``. A deferred import hides a cycle from the interpreter, not
from the design, so it counts the same. As in import-linter (grimp), an import names the
module it names: ``import a.b.c`` is an edge to ``a.b.c`` only, not to the packages
``a`` and ``a.b`` the interpreter also runs on the way.

The same rules run as import-linter contracts (``[tool.importlinter]`` in ``pyproject.toml``):
a layers contract over every module under ``sitssim/`` and a forbidden contract that keeps
the judges off the model. The tests at the end run them on this tree, show on a copy of it
that an upward import breaks them, and hold the contract's ``ignore_imports`` to a list that
can only shrink. The ``ast`` graph stays for what a layers contract does not see: a cycle
between modules of one package.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import networkx as nx
import pytest

import sitssim

PACKAGE_DIR = Path(sitssim.__file__).parent
ROOT = PACKAGE_DIR.parent

# Layers below the workloads: the engine and what it is built from.
ENGINE_PACKAGES = ("sitssim.phy", "sitssim.link", "sitssim.fabric")
# What the engine must never import: the drivers above it and the top of the stack.
ABOVE_ENGINE = ("sitssim.workloads", "sitssim.results", "sitssim.cli", "sitssim.studies")
# The bottom layer: every other module may import these, so they import only each other.
LEAVES = frozenset(
    {"sitssim.units", "sitssim.errors", "sitssim.rng", "sitssim.quantities", "sitssim.files"}
)

# The wiring: one Stage per concern, above every model layer, below the orchestrator.
STAGES_PACKAGE = "sitssim.stages"
BELOW_STAGES = (*ENGINE_PACKAGES, "sitssim.switch", "sitssim.workloads", "sitssim.spec")
ABOVE_STAGES = (
    "sitssim.simulation",
    "sitssim.preflight",
    "sitssim.results",
    "sitssim.cli",
    "sitssim.studies",
)

# What the layers contract may still ignore, each with its reason in pyproject.toml. The
# contract fails on an entry that matches no import, so the list can only shrink.
ALLOWED_IGNORES: frozenset[str] = frozenset()
LAYERS_CONTRACT = "Imports point down the layers (ARCHITECTURE.md, Layers)"
JUDGES_CONTRACT = "Judges read the run's tables, never a model module"


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at ``path`` in the package rooted at ``root``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The module an imported dotted name means: itself, or the longest prefix that is a
    module (``pkg.mod.attr`` is an attribute of ``pkg.mod``); ``None`` if it is outside."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool) -> list[str]:
    """The dotted names one import statement may refer to, most specific first."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        # Relative: level 1 is the importer's own package.
        package = importer if is_package else importer.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    # ``from pkg import mod`` imports the submodule; ``from mod import name`` the module.
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def import_graph(root: Path) -> nx.DiGraph:
    """Edges ``importer -> imported`` between the modules of the package at ``root``,
    counting every import statement in a module wherever it sits."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = set(files)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for importer, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _targets(node, importer, is_package)
            if isinstance(node, ast.ImportFrom):
                # Submodules named in the list, and the module the other names come from.
                subs = [n for n in names[:-1] if n in modules]
                names = subs if len(subs) == len(node.names) else [*subs, names[-1]]
            for name in names:
                target = _resolve(name, modules)
                if target is not None and target != importer:
                    graph.add_edge(importer, target)
    return graph


def modules_in_cycles(graph: nx.DiGraph) -> set[str]:
    """Every module in an import cycle: the strongly connected components of two or more."""
    return {m for scc in nx.strongly_connected_components(graph) if len(scc) > 1 for m in scc}


def _under(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return import_graph(PACKAGE_DIR)


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_graph_counts_deferred_type_checking_and_relative_imports(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "import numpy\n",
            "pkg/mid/__init__.py": "from . import part\n",
            "pkg/mid/part.py": (
                "from typing import TYPE_CHECKING\n"
                "from ..low import thing\n"
                "if TYPE_CHECKING:\n"
                "    from pkg.top import Top\n"
            ),
            "pkg/top.py": (
                "import pkg.mid.part\n"
                "def later():\n"
                "    from pkg import low\n"
                "    from pkg.mid.part import name\n"
            ),
        },
    )
    graph = import_graph(root)
    assert set(graph.edges) == {
        ("pkg.mid", "pkg.mid.part"),
        ("pkg.mid.part", "pkg.low"),
        ("pkg.mid.part", "pkg.top"),
        ("pkg.top", "pkg.mid.part"),
        ("pkg.top", "pkg.low"),
    }
    # The TYPE_CHECKING import and the module-level one close a cycle; numpy is outside.
    assert modules_in_cycles(graph) == {"pkg.mid.part", "pkg.top"}


def test_graph_of_an_acyclic_package_has_no_cycle(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/a.py": "from pkg.b import x\n", "pkg/b.py": "y = 1\n"},
    )
    graph = import_graph(root)
    assert set(graph.edges) == {("pkg.a", "pkg.b")}
    assert modules_in_cycles(graph) == set()


def test_graph_sees_the_whole_package(graph: nx.DiGraph) -> None:
    # A builder that silently read nothing would pass every rule below.
    assert {"sitssim.fabric.transport", "sitssim.rng", "sitssim.workloads.synthetic"} <= set(graph)
    assert graph.has_edge("sitssim.fabric.transport", "sitssim.fabric.messages")
    assert graph.has_edge("sitssim.workloads.synthetic", "sitssim.rng")


def test_engine_imports_nothing_above_it(graph: nx.DiGraph) -> None:
    upward = sorted(
        (a, b) for a, b in graph.edges if _under(a, ENGINE_PACKAGES) and _under(b, ABOVE_ENGINE)
    )
    assert upward == []


def test_leaves_import_only_leaves(graph: nx.DiGraph) -> None:
    assert set(graph) >= LEAVES
    escapes = sorted((a, b) for a, b in graph.edges if a in LEAVES and b not in LEAVES)
    assert escapes == []


def _engine_rank(module: str) -> int | None:
    for rank, package in enumerate(ENGINE_PACKAGES):
        if _under(module, (package,)):
            return rank
    return None


def test_engine_layers_import_only_down(graph: nx.DiGraph) -> None:
    upward = sorted(
        (a, b)
        for a, b in graph.edges
        if (ra := _engine_rank(a)) is not None and (rb := _engine_rank(b)) is not None and rb > ra
    )
    assert upward == []


def test_no_import_cycle_among_sitssim_modules(graph: nx.DiGraph) -> None:
    cycles = sorted(modules_in_cycles(graph))
    assert cycles == [], f"modules in an import cycle: {cycles}"


def layer_crossings(
    graph: nx.DiGraph, package: str, below: tuple[str, ...], above: tuple[str, ...]
) -> list[tuple[str, str]]:
    """Imports that break ``package``'s place between ``below`` and ``above``: a module
    below importing it, or it importing a module above."""
    return sorted(
        (a, b)
        for a, b in graph.edges
        if (_under(a, below) and _under(b, (package,)))
        or (_under(a, (package,)) and _under(b, above))
    )


def test_layer_crossings_see_both_directions() -> None:
    graph = nx.DiGraph(
        [
            ("pkg.wire.a", "pkg.model.m"),
            ("pkg.model.m", "pkg.wire.a"),
            ("pkg.wire.a", "pkg.top"),
            ("pkg.top", "pkg.wire.a"),
            ("pkg.wire", "pkg.wire.a"),
        ]
    )
    assert layer_crossings(graph, "pkg.wire", ("pkg.model",), ("pkg.top",)) == [
        ("pkg.model.m", "pkg.wire.a"),
        ("pkg.wire.a", "pkg.top"),
    ]


def test_stages_sit_above_the_layers_and_below_the_orchestrator(graph: nx.DiGraph) -> None:
    # The rule is not vacuous: stages import the models, and the orchestrator the stages.
    assert graph.has_edge("sitssim.stages.credits", "sitssim.link.credit_link")
    assert graph.has_edge("sitssim.simulation", "sitssim.stages.registry")
    assert graph.has_edge("sitssim.preflight", "sitssim.stages.registry")
    assert layer_crossings(graph, STAGES_PACKAGE, BELOW_STAGES, ABOVE_STAGES) == []


def test_no_wiring_module_is_left_in_a_layer() -> None:
    # A run's wiring belongs in sitssim/stages/, never beside the models it builds.
    left = sorted(
        str(p.relative_to(PACKAGE_DIR))
        for package in ("phy", "link", "fabric", "switch", "workloads")
        for p in (PACKAGE_DIR / package).glob("*stage*.py")
    )
    assert left == []


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter with ``root``'s ``pyproject.toml`` on the ``sitssim`` found from
    ``root`` (a copy placed there shadows the installed package)."""
    run = (
        "from importlinter.cli import lint_imports; "
        "raise SystemExit(lint_imports(config_filename='pyproject.toml', no_cache=True, "
        "no_logo=True))"
    )
    return subprocess.run(
        [sys.executable, "-c", run],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_import_contracts_are_kept() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def _contract(contract_id: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    linter = config["tool"]["importlinter"]
    assert linter["exclude_type_checking_imports"] is False
    (contract,) = [c for c in linter["contracts"] if c["id"] == contract_id]
    return contract


def test_contract_ignores_only_what_is_allowed() -> None:
    layers = _contract("layers")
    assert layers["exhaustive"] is True
    assert set(layers.get("ignore_imports", ())) <= ALLOWED_IGNORES


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        # TYPE_CHECKING-only, and upward inside the engine: what the AST list used to allow.
        (
            "phy/upward_probe.py",
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from sitssim.fabric.topology import Fabric\n",
            LAYERS_CONTRACT,
        ),
        # Deferred, from a judge into the model.
        (
            "spec/model_probe.py",
            "def later():\n    from sitssim.phy.ltssm import Ltssm\n    return Ltssm\n",
            JUDGES_CONTRACT,
        ),
    ],
)
def test_an_upward_import_breaks_a_contract(
    tmp_path: Path, module: str, source: str, contract: str
) -> None:
    shutil.copytree(PACKAGE_DIR, tmp_path / "sitssim", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "sitssim" / module).write_text(source, encoding="utf-8")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = {
        line.partition(" BROKEN")[0] for line in done.stdout.splitlines() if " BROKEN" in line
    }
    assert broken == {contract}
    # The break names the probe module: the copy was read, not the installed package.
    assert "sitssim." + module.removesuffix(".py").replace("/", ".") in done.stdout
