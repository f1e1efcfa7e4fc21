"""Property tests of clause ``switch.ecmp_weight``'s ECMP core (``sitssim.switch.ecmp``).

* Implicit weights follow the SPEC formula for any negotiated rate and LLDP delay, and a
  port trained to fewer lanes or a lower rate never weighs more.
* Weighted ECMP: for arbitrary weights (2 to 8 members, weights 1 to 100) and many flows
  (distinct hashed fields), members' shares of the flows pass a chi-square goodness of fit
  to weight / sum of weights at alpha = 1e-6. The same test is the clause's failing side:
  a faulty device hashing uniformly over the same members is rejected by it whenever the
  weights differ by a factor of two or more, and in most cases with unequal weights.
* Hash polarisation: two consecutive stages with equal seeds choose dependently (the
  flows fall into at most n1 + n2 - 1 of the n1 x n2 pairs of choices, and into the
  diagonal when the groups are alike); with different seeds the choices pass a
  chi-square test of independence.

Every property runs derandomised, so a run is the same on every machine.
"""

from __future__ import annotations

from collections import Counter
from itertools import accumulate

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st
from scipy.stats import chi2, chi2_contingency

from sitssim.switch.ecmp import (
    flow_hash,
    flow_key,
    implicit_weight,
    negotiated_if_speed_bps,
    weighted_member,
)

CLAUSE = "switch.ecmp_weight"
ALPHA = 1e-6
FLOWS = 10_000
# Distinct (src, dst, tenant) fields, one triple per flow.
KEYS = [flow_key((i % 64, i // 64 % 64, i // 4096)) for i in range(FLOWS)]
SEEDS = st.integers(0, 2**64 - 1)


def goodness_of_fit_p(counts: list[int], weights: list[int]) -> float:
    """The p-value of ``counts`` against shares ``weights / sum(weights)``."""
    n, total = sum(counts), sum(weights)
    expected = [n * w / total for w in weights]
    stat = sum((c - e) ** 2 / e for c, e in zip(counts, expected, strict=True))
    return float(chi2.sf(stat, len(counts) - 1))


def shares(seed: int, cumulative: tuple[int, ...]) -> list[int]:
    """How many of the flows each member takes at a stage with ``seed``."""
    chosen = Counter(weighted_member(flow_hash(k, seed), cumulative) for k in KEYS)
    return [chosen[i] for i in range(len(cumulative))]


@settings(derandomize=True)
@given(
    lanes=st.integers(1, 32),
    fewer=st.integers(1, 32),
    gt=st.sampled_from([2.5, 8.0, 16.0, 25.0, 32.0, 50.0, 64.0, 100.0]),
    lldp_ms=st.floats(0, 100, allow_nan=False),
)
def test_implicit_weights_follow_the_formula_and_fall_with_the_trained_width(
    lanes: int, fewer: int, gt: float, lldp_ms: float
) -> None:
    speed = negotiated_if_speed_bps(lanes, gt)
    weight = implicit_weight(speed, lldp_ms)
    assert weight == max(1, int(lanes * gt) - int(2 * lldp_ms))
    narrower = implicit_weight(negotiated_if_speed_bps(min(lanes, fewer), gt), lldp_ms)
    slower = implicit_weight(negotiated_if_speed_bps(lanes, gt / 2), lldp_ms)
    assert narrower <= weight and slower <= weight
    assert implicit_weight(speed, lldp_ms + 0.5) <= weight


def test_weighted_shares_converge_and_a_uniform_hash_is_rejected() -> None:
    """Both sides of the clause from one chi-square: the weighted split passes it in every
    generated case, the faulty uniform one fails it where the weights differ enough."""
    uneven: list[tuple[float, bool]] = []

    @settings(derandomize=True)
    @given(weights=st.lists(st.integers(1, 100), min_size=2, max_size=8), seed=SEEDS)
    def case(weights: list[int], seed: int) -> None:
        weighted = shares(seed, tuple(accumulate(weights)))
        assert goodness_of_fit_p(weighted, weights) > ALPHA
        if len(set(weights)) > 1:
            faulty = shares(seed, tuple(range(1, len(weights) + 1)))
            rejected = goodness_of_fit_p(faulty, weights) < ALPHA
            uneven.append((max(weights) / min(weights), rejected))
            event("uniform hash rejected" if rejected else "uniform hash not rejected")

    case()
    # The faulty side is really exercised, and the test's range holds both sides.
    assert len(uneven) >= 20
    assert sum(r for _, r in uneven) >= 0.75 * len(uneven)
    assert all(r for ratio, r in uneven if ratio >= 2)
    assert sum(ratio >= 2 for ratio, _ in uneven) >= 10


@settings(derandomize=True)
@given(n1=st.integers(2, 8), n2=st.integers(2, 8), seed=SEEDS, other=SEEDS)
def test_equal_stage_seeds_polarise_and_different_seeds_do_not(
    n1: int, n2: int, seed: int, other: int
) -> None:
    flows = KEYS[: 100 * n1 * n2]
    first, second = tuple(range(1, n1 + 1)), tuple(range(1, n2 + 1))
    stage1 = [weighted_member(flow_hash(k, seed), first) for k in flows]

    def table(seed2: int) -> np.ndarray:
        out = np.zeros((n1, n2), dtype=int)
        for k, c1 in zip(flows, stage1, strict=True):
            out[c1, weighted_member(flow_hash(k, seed2), second)] += 1
        return out

    polarised = table(seed)
    # The second choice is a monotone function of the same hash as the first.
    assert np.count_nonzero(polarised) <= n1 + n2 - 1
    if n1 == n2:
        assert np.count_nonzero(polarised - np.diag(np.diag(polarised))) == 0
    assert chi2_contingency(polarised).pvalue < ALPHA
    if other != seed:
        independent = table(other)
        assert np.count_nonzero(independent) == n1 * n2
        assert chi2_contingency(independent).pvalue > ALPHA
