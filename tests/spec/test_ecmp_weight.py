"""The judge of ``switch.ecmp_weight``: passes the shipped multivendor run, fails its faulty
twin from the observed split, fails a weight off the formula, and is n/a without ECMP.

The two shipped runs give the tables (about a second each); the judge's other cases change
one fact of the passing run's table, so each failure is the judge's reading of that fact.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sitssim.scenario import load_scenario
from sitssim.simulation import simulate
from sitssim.spec.catalogue import CLAUSES
from sitssim.spec.context import RunContext
from sitssim.spec.switch_clauses import ecmp_weight
from sitssim.spec.verdict import Verdict

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
CLAUSE = CLAUSES["switch.ecmp_weight"]


@pytest.fixture(scope="module")
def passing() -> pd.DataFrame:
    return simulate(load_scenario(SCENARIOS / "ecmp_multivendor.yaml")).tables["ecmp"]


@pytest.fixture(scope="module")
def faulty() -> pd.DataFrame:
    path = SCENARIOS / "violations" / "ecmp_faulty_hash.yaml"
    return simulate(load_scenario(path)).tables["ecmp"]


def judge(table: pd.DataFrame | None) -> Verdict:
    return ecmp_weight(CLAUSE, RunContext(tables={} if table is None else {"ecmp": table}))


def test_the_multivendor_run_passes_with_the_sources_weights(passing: pd.DataFrame) -> None:
    v = judge(passing)
    assert (v.verdict, v.basis, v.op, v.limit) == ("pass", "measured", ">=", 1e-6)
    assert v.measured is not None and v.measured > 1e-3
    a = passing[passing["node"] == "a"]
    assert a["weight"].tolist() == [100, 96, 89] and a["flows"].sum() > 30_000
    assert "a>{m0,m1,m2}" in v.detail and "alpha 1e-06" in v.detail
    assert v.evidence[0].table == "ecmp" and set(v.evidence[0].rows) == set(a["ecmp_id"])


def test_the_faulty_hash_fails_from_the_observed_split(faulty: pd.DataFrame) -> None:
    v = judge(faulty)
    assert (v.verdict, v.basis) == ("fail", "measured")
    assert v.measured is not None and v.measured < 1e-12
    # The weights are right; only the split is wrong.
    a = faulty[faulty["node"] == "a"]
    assert a["weight"].tolist() == [100, 96, 89]
    assert (a["share"] - 1 / 3).abs().max() < 0.01
    assert "weighed off the formula" not in v.detail and "a>{m0,m1,m2} split" in v.detail


def test_a_weight_off_the_formula_fails(passing: pd.DataFrame) -> None:
    wrong = passing.copy()
    # As a device computing int(round(2 x 19.7)) would: 40, not 39.
    wrong.loc[wrong["link"] == "a>m2", "weight"] = 88
    v = judge(wrong)
    assert (v.verdict, v.measured, v.basis) == ("fail", 1.0, "measured")
    assert "a>m2 weight 88" in v.detail and "gives 89" in v.detail
    row = wrong.loc[wrong["link"] == "a>m2", "ecmp_id"].item()
    assert v.evidence[0].rows == (row,)


def test_a_split_off_the_weights_fails_and_a_small_group_is_not_tested(
    passing: pd.DataFrame,
) -> None:
    skewed = passing.copy()
    a = skewed["node"] == "a"
    skewed.loc[a, "flows"] = [11_000, 11_000, 11_000]
    assert judge(skewed).verdict == "fail"
    few = passing.copy()
    few.loc[few["node"] == "a", "flows"] = [1, 1, 1]
    v = judge(few)
    # Three flows say nothing about a split: the verdict rests on the weights alone.
    assert (v.verdict, v.op, v.measured) == ("pass", "<=", 0.0)
    assert "0 groups tested" in v.detail


def test_without_ecmp_or_without_a_group_it_is_not_applicable(passing: pd.DataFrame) -> None:
    assert judge(None).verdict == "n/a" and "switch.ecmp" in judge(None).detail
    v = judge(passing.iloc[0:0])
    assert v.verdict == "n/a" and "no group" in v.detail
