"""The catalogue and the judges match exactly, checked when the registry is imported."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

import sitssim.spec.registry as registry
from sitssim.config import phy_profile as profile
from sitssim.phy import pam4
from sitssim.spec.catalogue import CATALOGUE, CLAUSES, index
from sitssim.spec.clause import Clause, Limit
from sitssim.spec.registry import (
    JUDGE_TABLES,
    JUDGES,
    RegistryError,
    RunContext,
    Verdict,
    bind_judges,
    judge_all,
)


def _judge(clause: Clause, ctx: RunContext) -> Verdict:
    return clause.not_applicable("a stand-in")


def test_every_modelled_clause_has_a_judge_and_no_other_does() -> None:
    modelled = {c.id for c in CATALOGUE if c.modelled}
    assert set(JUDGES) == modelled
    # Every clause of the spec is judged now: none is left "not modelled yet".
    assert {c.id for c in CATALOGUE if not c.modelled} == set()


def test_a_modelled_clause_without_a_judge_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(CLAUSES, "phy.new_rule", Clause("phy.new_rule", "L1", "§9", "new"))
    with pytest.raises(RegistryError, match=r"without a judge: phy\.new_rule"):
        bind_judges(CLAUSES, JUDGE_TABLES)


def test_a_clause_marked_not_modelled_needs_no_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    later = Clause("phy.later", "L1", "§9", "later", modelled=False)
    monkeypatch.setitem(CLAUSES, "phy.later", later)
    assert "phy.later" not in bind_judges(CLAUSES, JUDGE_TABLES)


def test_a_clause_without_a_judge_stops_the_start_up() -> None:
    """The check runs on import: a catalogue entry nobody judges fails before any run."""
    code = (
        "from sitssim.spec.catalogue import CLAUSES\n"
        "from sitssim.spec.clause import Clause\n"
        "CLAUSES['fabric.extra'] = Clause('fabric.extra', 'L3', '§9', 'extra')\n"
        "import sitssim.spec.registry\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "RegistryError" in done.stderr and "fabric.extra" in done.stderr


def test_a_judge_for_an_unknown_clause_is_refused() -> None:
    with pytest.raises(RegistryError, match=r"'phy\.no_such_clause'"):
        bind_judges(CLAUSES, (*JUDGE_TABLES, {"phy.no_such_clause": _judge}))


def test_a_judge_for_a_clause_marked_not_modelled_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(
        CLAUSES, "phy.later", Clause("phy.later", "L1", "§9", "later", modelled=False)
    )
    with pytest.raises(RegistryError, match=r"phy\.later, .* modelled=False"):
        bind_judges(CLAUSES, (*JUDGE_TABLES, {"phy.later": _judge}))


def test_a_clause_judged_twice_is_refused() -> None:
    with pytest.raises(RegistryError, match=r"fabric\.hop_limit has two judges"):
        bind_judges(CLAUSES, (*JUDGE_TABLES, {"fabric.hop_limit": _judge}))


def test_a_clause_id_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"phy\.symbol_rate declared twice"):
        index((*CATALOGUE, CATALOGUE[0]))


def test_every_modelled_clause_has_a_limit_in_the_catalogue() -> None:
    for clause in CATALOGUE:
        assert bool(clause.limits) == clause.modelled, clause.id


def test_not_modelled_clauses_are_n_a_without_running_a_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    later = Clause("phy.later", "L1", "§9", "later", modelled=False)
    unmodelled = {later.id: later}
    monkeypatch.setattr(registry, "CLAUSES", unmodelled)
    verdicts = judge_all(RunContext(tables={}))
    assert [v.id for v in verdicts] == list(unmodelled)
    assert all(v.verdict == "n/a" for v in verdicts)
    assert verdicts[0].detail == "not modelled yet: arrives with the roadmap's next layer"


def test_a_judge_takes_its_limit_from_the_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tightening the catalogue's hop limit moves the verdict: the judge restates nothing."""
    messages = pd.DataFrame({"msg_id": [0, 1], "hops": [2, 4], "path": ["a>b", "a>c>d>e>b"]})
    ctx = RunContext(tables={"messages": messages})
    assert JUDGES["fabric.hop_limit"](ctx).verdict == "pass"
    monkeypatch.setitem(CLAUSES["fabric.hop_limit"].limits, "hops", Limit("<=", "hops", 3.0))
    tightened = JUDGES["fabric.hop_limit"](ctx)
    assert (tightened.verdict, tightened.limit, tightened.op) == ("fail", 3.0, "<=")
    assert tightened.evidence[0].rows == (1,)


def test_a_constant_limit_refuses_a_value_and_a_formula_needs_one() -> None:
    with pytest.raises(ValueError, match="takes no value"):
        Limit("<=", "hops", 7.0).bound(3.0)
    with pytest.raises(ValueError, match="formula"):
        Limit("<=", "ns").bound()
    assert Limit("<=", "ns").bound(214.5) == 214.5


def test_the_spec_defaults_of_the_device_profiles_are_the_catalogue_s() -> None:
    """A device's default profile implements the spec: the two sources agree."""
    retrain = CLAUSES["phy.retrain_trigger"].params
    assert retrain["ber_threshold"] == profile.SPEC_RETRAIN_THRESHOLD
    assert retrain["windows"] == profile.SPEC_RETRAIN_WINDOWS
    training = CLAUSES["phy.training_sequence"].params
    assert training["prbs_order"] == profile.SPEC_TRAINING_PRBS
    assert training["symbols"] == profile.SPEC_TRAINING_SYMBOLS
    rate = CLAUSES["phy.symbol_rate"]
    assert rate.limits["rate"].bound() == pam4.SYMBOL_RATE_GBD
    assert rate.params["bits_per_symbol"] == pam4.BITS_PER_SYMBOL
