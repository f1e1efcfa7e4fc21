"""Every module the project imports comes from the standard library, from the project
itself, or from a distribution that pyproject.toml names directly.

A package that only arrives as a dependency of a dependency (click under an older typer)
works until that dependency drops it; then a fresh machine fails at collection while an
old one still passes. Imports are read from the source text (every ``import`` statement,
deferred and TYPE_CHECKING ones included) of sitssim/, tests/, benchmarks/ and the code
cells of the shipped notebooks, which the suite executes.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("sitssim", "tests", "benchmarks")


def normalise(distribution: str) -> str:
    """PEP 503 name: 'ruamel.yaml', 'ruamel_yaml' and 'Ruamel-YAML' are one distribution."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def declared_distributions(pyproject: Path) -> set[str]:
    """Runtime dependencies and every optional extra, by normalised name."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return {normalise(re.match(r"[A-Za-z0-9_.\-]+", r).group()) for r in requirements}


def imported_modules(source: str) -> set[str]:
    """Top-level names of absolute imports (relative imports are the project's own)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def notebook_source(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    # IPython magics and shell escapes are not Python.
    return "\n".join(
        line for cell in code for line in cell.splitlines() if line.lstrip()[:1] not in "%!"
    )


def project_sources(root: Path) -> dict[Path, str]:
    sources = {
        p: p.read_text(encoding="utf-8") for d in SOURCE_DIRS for p in (root / d).rglob("*.py")
    }
    sources.update({p: notebook_source(p) for p in (root / "notebooks").glob("*.ipynb")})
    return sources


def local_modules(root: Path) -> set[str]:
    """Names the project's own files answer to: the package, and test and benchmark
    helpers imported by their folder's name (pytest's ``pythonpath = ["tests"]``)."""
    names = {"sitssim"}
    for folder in ("tests", "benchmarks", "notebooks"):
        for path in (root / folder).rglob("*"):
            if path.suffix == ".py" or (path.is_dir() and "__pycache__" not in path.parts):
                names.add(path.stem)
    return names


def undeclared_imports(
    sources: dict[Path, str],
    declared: set[str],
    local: set[str],
    providers: dict[str, list[str]],
) -> dict[str, list[str]]:
    """Imported top-level module -> files, for every import that nothing declared provides.

    A module no installed distribution provides counts as undeclared too: on the machine
    that runs this, importing it would fail.
    """
    bad: dict[str, list[str]] = {}
    for path, source in sorted(sources.items()):
        for module in sorted(imported_modules(source)):
            if module in sys.stdlib_module_names or module in local:
                continue
            if any(normalise(d) in declared for d in providers.get(module, [])):
                continue
            bad.setdefault(module, []).append(str(path.relative_to(ROOT)))
    return bad


def test_every_import_is_declared_in_pyproject() -> None:
    bad = undeclared_imports(
        project_sources(ROOT),
        declared_distributions(ROOT / "pyproject.toml"),
        local_modules(ROOT),
        packages_distributions(),
    )
    assert not bad, "imports no distribution in pyproject.toml provides: " + "; ".join(
        f"{module} (in {', '.join(files[:3])})" for module, files in bad.items()
    )


@pytest.mark.parametrize(
    ("source", "providers", "expected"),
    [
        # click installed only because an old typer pulled it in: not declared.
        ("from click.testing import Result\n", {"click": ["click"]}, {"click"}),
        # A deferred import inside a function counts as much as a top-level one.
        ("def f():\n    import jinja2\n", {"jinja2": ["Jinja2"]}, {"jinja2"}),
        # Not installed at all.
        ("import nosuchthing\n", {}, {"nosuchthing"}),
        # Declared under another spelling of its distribution name.
        ("import ruamel.yaml\n", {"ruamel": ["ruamel.yaml"]}, set()),
        ("import yaml\n", {"yaml": ["PyYAML"]}, {"yaml"}),
        ("import json, os.path\nfrom . import sibling\n", {}, set()),
    ],
)
def test_the_check_names_what_only_a_transitive_dependency_provides(
    source: str, providers: dict[str, list[str]], expected: set[str]
) -> None:
    found = undeclared_imports(
        {ROOT / "tests" / "example.py": source},
        declared={"ruamel-yaml", "typer"},
        local={"sitssim"},
        providers=providers,
    )
    assert set(found) == expected


def test_declared_names_are_read_from_dependencies_and_extras(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["ruamel.yaml>=0.18", "ml_dtypes"]\n'
        "[project.optional-dependencies]\ntest = [\"Hypothesis>=6; python_version>'3'\"]\n",
        encoding="utf-8",
    )
    assert declared_distributions(pyproject) == {"ruamel-yaml", "ml-dtypes", "hypothesis"}
