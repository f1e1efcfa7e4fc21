"""The conformance registry (``sitssim/spec/conformance.py``) against what it stands for.

Each witness is read through its golden report, which ``tests/test_shipped_scenarios.py``
holds byte for byte to a real run of the scenario: a failing witness fails its clause
with evidence rows and fails no clause it does not list, a passing witness passes, and
the basis is what the witnesses' verdicts say. The property tests listed for a clause are
exactly the files of ``tests/properties/`` whose docstrings name it. SPEC.md (outside the
repository, in the project's shared folder) is compared when it is there.

A clause still missing a witness, a property test, or a witness of the kind SPEC.md
names is a strict xfail below, so the day the missing piece is registered its test
passes, the xfail fails, and the clause leaves the list.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path

import pytest
from shipped_examples import EXAMPLES, REFERENCES, VIOLATIONS, golden_path

from sitssim.spec.catalogue import CLAUSES
from sitssim.spec.conformance import (
    BY_CLAUSE,
    CONFORMANCE,
    FAILURES,
    MATRIX_COLUMNS,
    failing,
    matrix,
    multi_clause_witnesses,
)

ROOT = Path(__file__).resolve().parents[2]
PROPERTIES = ROOT / "tests" / "properties"
SPEC_MD = ROOT.parent / "shared" / "SPEC.md"
DOC = ROOT / "docs" / "conformance.md"
BEGIN, END = "<!-- conformance-matrix:begin -->", "<!-- conformance-matrix:end -->"
REWRITE = "pytest tests/spec/test_conformance.py --update-golden"
KINDS = ("emergent", "misconfiguration", "faulty device", "mutation")

NO_FAILING_WITNESS: dict[str, str] = {}
NO_PROPERTY_TEST: dict[str, str] = {}


def per_clause(missing: dict[str, str]) -> list[object]:
    return [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=missing[c]))
        if c in missing
        else c
        for c in CLAUSES
    ]


@functools.cache
def verdicts(scenario: str) -> dict[str, dict]:
    """The golden report's verdicts of a scenario named as the registry names it."""
    golden = golden_path(ROOT / scenario)
    assert golden.exists(), f"{scenario} has no golden report ({golden})"
    report = json.loads(golden.read_text(encoding="utf-8"))
    return {c["id"]: c for c in report["clauses"]}


def fails(scenario: str) -> set[str]:
    return {cid for cid, v in verdicts(scenario).items() if v["verdict"] == "fail"}


def evidence_rows(verdict: dict) -> int:
    return sum(len(e["rows"]) for e in verdict["evidence"])


def shipped() -> list[str]:
    return [p.relative_to(ROOT).as_posix() for p in EXAMPLES + VIOLATIONS + REFERENCES]


def test_every_catalogue_clause_has_one_entry_in_catalogue_order() -> None:
    assert [c.clause for c in CONFORMANCE] == list(CLAUSES)
    assert {cid for fails_ in FAILURES.values() for cid in fails_} <= set(CLAUSES)


def spec_md_rows() -> dict[str, str]:
    """SPEC.md's clause tables: each backticked clause ID with its row's witness cell."""
    if not SPEC_MD.exists():
        pytest.skip(f"SPEC.md is not at {SPEC_MD} (a clone outside the project's folder)")
    rows = {}
    for line in SPEC_MD.read_text(encoding="utf-8").splitlines():
        found = re.match(r"\|\s*`([a-z0-9_]+\.[a-z0-9_]+)`", line)
        if found:
            rows[found[1]] = line.rstrip().rstrip("|").rsplit("|", 1)[1].lower()
    assert len(rows) >= 20, f"SPEC.md's clause tables not found in {SPEC_MD}"
    return rows


def test_every_spec_md_clause_is_in_the_registry() -> None:
    assert set(spec_md_rows()) == set(BY_CLAUSE)


def test_the_witness_kinds_are_those_spec_md_names() -> None:
    named = {cid: {k for k in KINDS if k in cell} for cid, cell in spec_md_rows().items()}
    assert {c.clause: set(c.kinds) for c in CONFORMANCE} == named


def test_every_witness_is_a_shipped_scenario_with_a_golden_report() -> None:
    witnesses = {p for c in CONFORMANCE for p in c.passing} | set(FAILURES)
    assert witnesses <= set(shipped()), witnesses - set(shipped())
    for path in witnesses:
        verdicts(path)


@pytest.mark.parametrize("clause", list(CLAUSES))
def test_each_passing_witness_passes_its_clause(clause: str) -> None:
    passing = BY_CLAUSE[clause].passing
    assert passing, f"{clause} has no passing witness"
    assert {p: verdicts(p)[clause]["verdict"] for p in passing} == dict.fromkeys(passing, "pass")


@pytest.mark.parametrize("clause", per_clause(NO_FAILING_WITNESS))
def test_each_failing_witness_fails_its_clause_with_evidence_rows(clause: str) -> None:
    witnesses = failing(clause)
    assert witnesses, f"{clause} has no failing witness in FAILURES"
    for path in witnesses:
        verdict = verdicts(path)[clause]
        assert verdict["verdict"] == "fail", (path, verdict)
        assert evidence_rows(verdict) > 0, f"{path} fails {clause} without evidence rows"


@pytest.mark.parametrize("clause", list(CLAUSES))
def test_each_witness_kind_spec_md_names_is_shipped(clause: str) -> None:
    """Every kind SPEC.md names for the clause has a failing scenario; a further witness of
    another honest kind is welcome (a mutation witness is a codec's property test, not a
    scenario)."""
    kinds = {f.kind for f in failing(clause).values()}
    assert set(BY_CLAUSE[clause].kinds) - {"mutation"} <= kinds, kinds


@pytest.mark.parametrize("scenario", shipped())
def test_a_shipped_scenario_fails_exactly_the_clauses_registered_for_it(scenario: str) -> None:
    """A new failing scenario is registered, and a witness lists, with a reason, every
    clause it fails: what it fails besides a clause is what it fails for that clause's
    sake."""
    registered = FAILURES.get(scenario, {})
    assert fails(scenario) == set(registered), f"register in FAILURES what {scenario} fails"
    assert all(f.why.strip() for f in registered.values())


@pytest.mark.parametrize("clause", list(CLAUSES))
def test_the_basis_is_that_of_the_witnesses_verdicts(clause: str) -> None:
    witnesses = (*BY_CLAUSE[clause].passing, *failing(clause))
    bases = {verdicts(p)[clause]["basis"] for p in witnesses}
    derived = "both" if bases == {"measured", "configured"} else bases.pop()
    assert BY_CLAUSE[clause].basis == derived


@pytest.mark.parametrize("clause", per_clause(NO_PROPERTY_TEST))
def test_each_clause_has_a_property_test(clause: str) -> None:
    assert BY_CLAUSE[clause].property_tests


def property_tests_naming() -> dict[str, set[str]]:
    """The files of tests/properties/ whose module, class or function docstrings name
    each clause ID."""
    ids = re.compile(
        r"(?<![\w.])(" + "|".join(map(re.escape, sorted(CLAUSES, key=len, reverse=True))) + r")\b"
    )
    named: dict[str, set[str]] = {cid: set() for cid in CLAUSES}
    for path in sorted(PROPERTIES.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = [
            ast.get_docstring(node) or ""
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        for cid in ids.findall("\n".join(docs)):
            named[cid].add(path.name)
    return named


def test_the_property_tests_listed_are_the_files_whose_docstrings_name_the_clause() -> None:
    named = property_tests_naming()
    assert sum(map(len, named.values())) >= 20, "tests/properties/ holds no clause's tests"
    listed = {c.clause: set(c.property_tests) for c in CONFORMANCE}
    assert listed == named, "list in CONFORMANCE the property tests naming each clause"


def matrix_markdown() -> str:
    """docs/conformance.md's matrix: the table, then the witnesses failing several clauses."""
    lines = [
        "| " + " | ".join(MATRIX_COLUMNS) + " |",
        "|" + "---|" * len(MATRIX_COLUMNS),
    ]
    for row in matrix():
        clause, *rest = row.cells("<br>")
        lines.append("| " + " | ".join([f"`{clause}`", *rest]) + " |")
    lines += ["", "Failing witnesses that fail more than one clause, and why each:", ""]
    for path, fails_ in multi_clause_witnesses().items():
        reasons = "; ".join(f"`{cid}`: {why}" for cid, why in fails_.items())
        lines.append(f"- `{path}`: {reasons}")
    return "\n".join(lines)


def test_the_matrix_in_the_docs_is_current(update_golden: bool) -> None:
    doc = DOC.read_text(encoding="utf-8")
    head, begin, rest = doc.partition(BEGIN)
    shipped_table, end, tail = rest.partition(END)
    assert begin and end, f"{DOC} has no {BEGIN} ... {END} section"
    table = "\n" + matrix_markdown() + "\n"
    if update_golden:
        DOC.write_text(head + BEGIN + table + END + tail, encoding="utf-8")
    else:
        assert shipped_table == table, f"{DOC.name}'s matrix is stale: run `{REWRITE}`"
