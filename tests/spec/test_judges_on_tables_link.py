"""The L2 CDC judges on hand-built ``cdc`` and ``fifo`` tables: the FIFO depth's two parts
(words lost, measured; depth against the formula, configured), the synchroniser latency
(< 1.2 ns at SS/125C) and the handshake setup (> 8.5 REFCLK cycles at FF/0C), each at,
just inside and just past its limit.
"""

from __future__ import annotations

import pytest
from spec.judge_tables import figures, judge, not_applicable, shown, table

from sitssim.spec.verdict import Part

CDC = (
    "cdc_id",
    "link",
    "corner",
    "flops",
    "ref_flops",
    "sync_period_ps",
    "max_rtt_cycles",
    "rtt_detect_cycles",
    "rtt_stop_path_cycles",
    "rtt_in_flight_words",
    "formula_depth",
    "min_safe_depth",
    "configured_depth",
    "depth_auto",
    "overflows",
    "peak_occupancy",
    "sync_latency_ns",
    "sync_latency_mean_ns",
    "sync_mtbf_years",
    "handshake_setup_cycles",
)
SS, FF = "SS/125C", "FF/0C"
ROW = {
    "link": "l",
    "corner": SS,
    "flops": 2,
    "ref_flops": 2,
    "sync_period_ps": 125.0,
    "max_rtt_cycles": 107,
    "rtt_detect_cycles": 3.0,
    "rtt_stop_path_cycles": 4.0,
    "rtt_in_flight_words": 100,
    "formula_depth": 218,
    "min_safe_depth": 200,
    "configured_depth": 218,
    "depth_auto": False,
    "overflows": 0,
    "peak_occupancy": 180,
    "sync_latency_ns": 1.0,
    "sync_latency_mean_ns": 0.8,
    "sync_mtbf_years": 1e9,
    "handshake_setup_cycles": 10.0,
}
FIFO = ("sample_id", "lost")
NO_CDC = "no CDC FIFO was evaluated"


def _cdc(*changes: dict, fifo: list[bool] | None = None) -> dict:
    """One cdc row per entry (ids from 10, links l0, l1, ...), and the fifo samples' lost flags."""
    rows = [
        (10 + i, *({**ROW, "link": f"l{i}", **change}[c] for c in CDC[1:]))
        for i, change in enumerate(changes)
    ]
    tables = {"cdc": table(CDC, rows)}
    if fifo is not None:
        tables["fifo"] = table(FIFO, [(100 + k, lost) for k, lost in enumerate(fifo)])
    return tables


def _parts(verdict) -> list[tuple]:
    return [(p.name, p.verdict, p.measured, p.op, p.limit, p.unit, p.basis) for p in verdict.parts]


LOST_OK = ("lost", "pass", 0.0, "<=", 0.0, "words", "measured")


# --- link.cdc_fifo_depth --------------------------------------------------------------


def test_fifo_depth_passes_at_the_formula_and_shows_the_tightest_link() -> None:
    verdict = judge("link.cdc_fifo_depth", **_cdc({"configured_depth": 240}, {}, fifo=[False]))
    assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "words", "measured")
    assert _parts(verdict) == [
        LOST_OK,
        ("depth", "pass", 218.0, ">=", 218.0, "entries", "configured"),
    ]
    assert all(isinstance(p, Part) for p in verdict.parts)
    assert shown(verdict) == [("cdc", [11], 1)]
    assert "; depth: configured 218 against the formula's (max_rtt_cycles 107 << 1) + 4" in (
        verdict.detail
    )


def test_a_fifo_short_of_the_formula_fails_as_configured_on_the_tightest_link() -> None:
    """l1 is one entry short of 218, l2 ten short of 310: l2 is the tightest."""
    verdict = judge(
        "link.cdc_fifo_depth",
        **_cdc({}, {"configured_depth": 217}, {"configured_depth": 300, "formula_depth": 310}),
    )
    assert figures(verdict) == ("fail", 300.0, ">=", 310.0, "entries", "configured")
    assert _parts(verdict) == [
        LOST_OK,
        ("depth", "fail", 300.0, ">=", 310.0, "entries", "configured"),
    ]
    assert shown(verdict) == [("cdc", [11, 12], 2)]
    assert "2 of 3 link-corner(s) below the formula" in verdict.detail


def test_the_fifo_depth_does_not_depend_on_the_table_s_index() -> None:
    tables = _cdc({"overflows": 3}, {"configured_depth": 217}, {})
    tables["cdc"].index = [7, 3, 5]
    verdict = judge("link.cdc_fifo_depth", **tables)
    assert figures(verdict) == ("fail", 3.0, "<=", 0.0, "words", "measured")
    assert shown(verdict) == [("cdc", [10, 11], 2)]


def test_lost_words_fail_as_measured_and_show_the_fifo_samples() -> None:
    verdict = judge(
        "link.cdc_fifo_depth",
        **_cdc(
            {},
            {"overflows": 2},
            {"overflows": 5, "configured_depth": 192},
            fifo=[False, True, True, False],
        ),
    )
    assert figures(verdict) == ("fail", 5.0, "<=", 0.0, "words", "measured")
    assert _parts(verdict) == [
        ("lost", "fail", 5.0, "<=", 0.0, "words", "measured"),
        ("depth", "fail", 192.0, ">=", 218.0, "entries", "configured"),
    ]
    assert shown(verdict) == [("fifo", [101, 102], 2), ("cdc", [11, 12], 2)]
    assert "lost: 5 word(s)" in verdict.detail and "on l2 at SS/125C" in verdict.detail
    assert "2 of 3 link-corner(s) lost words" in verdict.detail


@pytest.mark.parametrize("fifo", [None, [False, False]])
def test_lost_words_without_lost_fifo_samples_show_the_cdc_rows_only(fifo) -> None:
    verdict = judge("link.cdc_fifo_depth", **_cdc({"overflows": 1}, fifo=fifo))
    assert shown(verdict) == [("cdc", [10], 1)]


def test_fifo_samples_are_not_shown_when_nothing_was_lost() -> None:
    verdict = judge("link.cdc_fifo_depth", **_cdc({"configured_depth": 200}, fifo=[True]))
    assert verdict.verdict == "fail" and shown(verdict) == [("cdc", [10], 1)]


@pytest.mark.parametrize(("auto", "said"), [(True, True), (False, False)])
def test_an_auto_sized_depth_is_said_to_hold_by_construction(auto: bool, said: bool) -> None:
    verdict = judge("link.cdc_fifo_depth", **_cdc({"depth_auto": auto}))
    assert ("auto sizes it by the formula" in verdict.detail) == said


@pytest.mark.parametrize(("min_safe", "said"), [(218, False), (219, True)])
def test_a_formula_below_the_bisected_safe_depth_is_reported(min_safe: int, said: bool) -> None:
    verdict = judge("link.cdc_fifo_depth", **_cdc({}, {"min_safe_depth": min_safe}, {}))
    assert verdict.verdict == "pass"
    assert ("below the bisected minimal safe depth" in verdict.detail) == said
    if said:
        assert f"on 1 link-corner(s) (e.g. l1 at {SS}: 218 < 219)" in verdict.detail


@pytest.mark.parametrize(("formula", "said"), [(255, False), (256, True)])
def test_a_formula_beyond_the_8_bit_register_is_reported(formula: int, said: bool) -> None:
    verdict = judge(
        "link.cdc_fifo_depth", **_cdc({"formula_depth": formula, "configured_depth": 256})
    )
    assert ("exceeds the 255 that §3.1's 8-bit fifo_depth can hold" in verdict.detail) == said


def test_fifo_depth_without_cdc_rows_is_not_applicable() -> None:
    assert not_applicable(judge("link.cdc_fifo_depth"), NO_CDC)
    assert not_applicable(judge("link.cdc_fifo_depth", cdc=table(CDC, [])), NO_CDC)


# --- link.cdc_sync_latency ------------------------------------------------------------


def test_sync_latency_just_under_1_2_ns_passes_and_shows_the_worst_link() -> None:
    verdict = judge(
        "link.cdc_sync_latency",
        **_cdc(
            {"sync_latency_ns": 1.1},
            {"sync_latency_ns": 1.19},
            {"corner": FF, "sync_latency_ns": 2.0},
        ),
    )
    assert figures(verdict) == ("pass", 1.19, "<", 1.2, "ns", "measured")
    assert shown(verdict) == [("cdc", [11], 1)]
    assert "worst case over clock phases at SS/125C, l1: 2-flop synchroniser" in verdict.detail
    assert "0 of 2 link(s) at or over the limit" in verdict.detail


def test_sync_latency_at_1_2_ns_fails() -> None:
    verdict = judge(
        "link.cdc_sync_latency",
        **_cdc({"sync_latency_ns": 1.2}, {"sync_latency_ns": 1.1}, {"sync_latency_ns": 1.5}),
    )
    assert figures(verdict) == ("fail", 1.5, "<", 1.2, "ns", "measured")
    assert shown(verdict) == [("cdc", [10, 12], 2)]


# --- link.handshake_setup -------------------------------------------------------------


def test_handshake_setup_just_over_8_5_cycles_passes() -> None:
    verdict = judge(
        "link.handshake_setup",
        **_cdc(
            {"corner": FF, "handshake_setup_cycles": 9.0},
            {"corner": FF, "handshake_setup_cycles": 8.75},
            {"handshake_setup_cycles": 6.0},
        ),
    )
    assert figures(verdict) == ("pass", 8.75, ">", 8.5, "REFCLK cycles", "measured")
    assert shown(verdict) == [("cdc", [11], 1)]
    assert "shortest over clock phases at FF/0C, l1" in verdict.detail


def test_handshake_setup_at_8_5_cycles_fails() -> None:
    verdict = judge(
        "link.handshake_setup",
        **_cdc(
            {"corner": FF, "handshake_setup_cycles": 8.5},
            {"corner": FF, "handshake_setup_cycles": 6.0},
            {"corner": FF, "handshake_setup_cycles": 9.0},
        ),
    )
    assert figures(verdict) == ("fail", 6.0, ">", 8.5, "REFCLK cycles", "measured")
    assert shown(verdict) == [("cdc", [10, 11], 2)]


# --- the corner a clause names --------------------------------------------------------


@pytest.mark.parametrize(
    ("clause", "corner", "other"),
    [("link.cdc_sync_latency", SS, FF), ("link.handshake_setup", FF, SS)],
)
def test_a_clause_whose_corner_was_not_evaluated_is_not_applicable(
    clause: str, corner: str, other: str
) -> None:
    verdict = judge(clause, **_cdc({"corner": other}, {"corner": "TT/25C"}, {"corner": other}))
    assert not_applicable(
        verdict, f"the {corner} corner was not evaluated (link_layer.cdc.corners: {other}, TT/25C)"
    )
    assert not_applicable(judge(clause), NO_CDC)
    assert not_applicable(judge(clause, cdc=table(CDC, [])), NO_CDC)
