"""Property tests of clause ``switch.vc_quota`` end to end: scenario model, stage, judge.

Any table within the limits (at most 8 VCs per port, the port's own VCs counted, and at
most 64 slots per port over all tenants and VCs) loads and passes, ``configured``; any
other loads and fails, ``configured``, on the first limit it breaks. No write after load
changes a conforming switch's table (the clause still passes, every write recorded as
refused); every write a faulty switch applies to a running table fails the clause,
``measured``. The property runs once per side of the limits (within, too many slots, too
many VCs, both, and a table within them that a faulty switch rewrites while running),
each with the profile's full count of examples, so no side is left to the generator's
luck. Of the ci profile's 200 examples 30 pass and 170 fail: 80 on slots, 40 on VCs, 50
on writes applied while running (the ``within`` side's writes and faulty switch are
drawn at random, and in 10 of its 40 examples a write reaches the faulty switch).

Counted running this file alone under the ci profile. Hypothesis seeds a derandomised
test from its source (docstring included) and draws some values from the literals of the
sitssim modules loaded so far, so another commit or run order draws other examples, in
about these proportions.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from sitssim.config.vc_quota_config import QuotaRuntimeUpdateFault, QuotaUpdate, VcQuota
from sitssim.spec.catalogue import CLAUSES
from sitssim.spec.registry import RunContext
from sitssim.spec.switch_clauses import vc_quota
from sitssim.stages.switch_quota import QuotaPort, QuotaSection, QuotaStage, build_tables

# The clause's limits, restated independently of the catalogue.
SPEC_MAX_VCS = 8
SPEC_MAX_SLOTS = 64

TENANTS = ("A", "B", "C")
# Two switches of one port each; s1 is the one a fault may make apply writes.
PORTS = [QuotaPort(1, "s0", "g0", "g0-s0"), QuotaPort(3, "s1", "g0", "g0-s1")]
SIDES = ("within", "slots", "vcs", "both", "running writes")


@st.composite
def configured(draw: st.DrawFn, side: str) -> tuple[int, dict[str, list[int]]]:
    """(the port's VC count, table) on ``side`` of the limits: which ones the table breaks."""
    over_slots, over_vcs = side in ("slots", "both"), side in ("vcs", "both")
    within_vcs = st.integers(1, SPEC_MAX_VCS)
    beyond_vcs = st.integers(SPEC_MAX_VCS + 1, 16)
    if over_vcs:
        # Too many VCs from the port's own count, from a long row, or from both.
        port_vcs, width = draw(
            st.one_of(
                st.tuples(beyond_vcs, within_vcs),
                st.tuples(within_vcs, beyond_vcs),
                st.tuples(beyond_vcs, beyond_vcs),
            )
        )
    else:
        port_vcs, width = draw(within_vcs), draw(within_vcs)
    total = draw(
        st.integers(SPEC_MAX_SLOTS + 1, 3 * SPEC_MAX_SLOTS)
        if over_slots
        else st.integers(0, SPEC_MAX_SLOTS)
    )
    tenants = draw(st.lists(st.sampled_from(TENANTS), min_size=1, max_size=3, unique=True))
    lengths = [draw(st.integers(1, width)) for _ in tenants]
    lengths[draw(st.integers(0, len(tenants) - 1))] = width
    cells = sum(lengths)
    cuts = sorted(draw(st.lists(st.integers(0, total), min_size=cells - 1, max_size=cells - 1)))
    counts = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    table: dict[str, list[int]] = {}
    for tenant, n in zip(tenants, lengths, strict=True):
        table[tenant], counts = counts[:n], counts[n:]
    return port_vcs, table


def writes(to: tuple[str, ...] = ("s0", "s1")) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {
            "at": st.integers(0, 10_000).map(lambda t: f"{t}ns"),
            "switch": st.sampled_from(to),
            "tenant": st.sampled_from(TENANTS),
            "slots": st.lists(st.integers(0, 40), min_size=1, max_size=12),
        }
    )


@st.composite
def offered_writes(draw: st.DrawFn, side: str) -> tuple[list[dict], bool]:
    """Management writes and whether s1 is faulty: at random, or for ``running writes``
    a faulty s1 and at least one write to it among writes to both switches."""
    if side != "running writes":
        return draw(st.lists(writes(), max_size=4)), draw(st.booleans())
    offered = draw(st.lists(writes(), max_size=3))
    offered.insert(draw(st.integers(0, len(offered))), draw(writes(("s1",))))
    return offered, True


@pytest.mark.parametrize("side", SIDES)
@given(data=st.data())
def test_switch_vc_quota_verdict_follows_the_table_and_the_writes(
    side: str, data: st.DataObject
) -> None:
    port_vcs, table = data.draw(configured(side), label="port VCs, table")
    offered, faulty = data.draw(offered_writes(side), label="writes, s1 faulty")
    quota = VcQuota(table=table, updates=[QuotaUpdate(**w) for w in offered])
    faults = ((0, QuotaRuntimeUpdateFault(kind="quota_runtime_update", switch="s1")),)
    section = QuotaSection(quota, port_vcs, TENANTS, faults if faulty else (), 1e6)
    stage = QuotaStage(PORTS, build_tables(section, PORTS), tuple(quota.updates))
    # No PHY: both ports load at the start of traffic, before every write (at >= 0).
    tables = stage.tables(SimpleNamespace(tables={}))  # type: ignore[arg-type]
    verdict = vc_quota(CLAUSES["switch.vc_quota"], RunContext(tables=tables))

    slot_sum = sum(sum(row) for row in table.values())
    vcs = max(port_vcs, *(len(row) for row in table.values()))
    running = sum(1 for w in offered if faulty and w["switch"] == "s1")
    event("writes applied while running" if running else "no write applied while running")
    assert (slot_sum > SPEC_MAX_SLOTS) == (side in ("slots", "both"))
    assert (vcs > SPEC_MAX_VCS) == (side in ("vcs", "both"))
    if slot_sum > SPEC_MAX_SLOTS:
        expected = ("fail", "slots", float(slot_sum), "configured")
    elif vcs > SPEC_MAX_VCS:
        expected = ("fail", "VCs", float(vcs), "configured")
    elif running:
        expected = ("fail", "updates", float(running), "measured")
    else:
        expected = ("pass", "slots", float(slot_sum), "configured")
    event(f"{expected[0]} on {expected[1]}")
    assert (verdict.verdict, verdict.unit, verdict.measured, verdict.basis) == expected

    # The conforming switch refused every write, and its table is the one configured.
    ports = tables["vc_quota_ports"].set_index("switch")
    assert ports.loc["s0", "updates_applied"] == 0
    assert ports.loc["s0", "slot_sum"] == slot_sum
    done = tables["vc_quota_updates"]
    assert (done["applied"] == (done["switch"] == "s1") & faulty).all()
    assert done["loaded"].all()
