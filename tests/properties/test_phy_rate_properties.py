"""Clause property of phy.symbol_rate: the verdict on the receivers' counts agrees with the
rate the transmitters were configured to send.

A one-link fabric is trained at a drawn link rate and modulation; the judge reads only the
symbols each receiver counted against its own reference clock. The expectation comes from
the configuration alone, as the spec words the rule: pass exactly when the link sends PAM4
at a symbol rate within 300 ppm of 32 GBd. Rates within 10 ppm of that edge are not drawn
(the counter resolves 7.6 ppm). Under the ``ci`` profile 22 of the 40 draws conform and
18 violate.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from phy import phy_helpers as phy

SPEC_GBD, TOLERANCE_PPM = 32.0, 300.0


@st.composite
def link_signalling(draw: st.DrawFn) -> tuple[float, str, bool]:
    """(rate in GT/s, modulation, conforming): half the draws at 64 GT/s PAM4 within
    290 ppm, the rest off by more than 310 ppm, at another rate, or NRZ."""
    if draw(st.booleans(), label="conforming"):
        ppm = draw(st.floats(-290.0, 290.0))
        return 64.0 * (1 + ppm * 1e-6), "pam4", True
    how = draw(st.sampled_from(["off_ppm", "other_rate", "nrz"]))
    if how == "off_ppm":
        ppm = draw(st.floats(310.0, 2e5)) * draw(st.sampled_from([-1, 1]))
        return 64.0 * (1 + ppm * 1e-6), "pam4", False
    if how == "other_rate":
        return draw(st.sampled_from([16.0, 32.0, 48.0, 96.0, 128.0])), "pam4", False
    return draw(st.sampled_from([32.0, 64.0])), "nrz", False


def _expected_pass(rate_gts: float, modulation: str) -> bool:
    bits_per_symbol = 2 if modulation == "pam4" else 1
    gbd = rate_gts / bits_per_symbol
    return modulation == "pam4" and abs(gbd / SPEC_GBD - 1) * 1e6 <= TOLERANCE_PPM


@given(signalling=link_signalling())
def test_the_symbol_rate_verdict_is_the_configured_rates_as_the_receivers_counted_it(
    signalling: tuple[float, str, bool],
) -> None:
    """phy.symbol_rate: pass exactly for PAM4 at 32 GBd ± 300 ppm, from the counts alone."""
    rate, modulation, conforming = signalling
    scenario = phy.star(gpus=1, rate=f"{rate:.9f}GT/s", modulation=modulation)
    verdict = phy.phy_verdicts(scenario)["phy.symbol_rate"]
    assert _expected_pass(rate, modulation) == conforming
    assert (verdict.verdict == "pass") == conforming, verdict.detail
    # The measured value is the transmitter's symbol rate, to one symbol in the gate.
    symbols_per_ns = rate / (2 if modulation == "pam4" else 1)
    assert abs(verdict.measured - symbols_per_ns) <= 1 / 4096 + 1e-12
