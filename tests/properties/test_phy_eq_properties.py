"""Clause properties of Level-3 equalisation at the signal level.

* ``phy.reset_to_l0``: a lossier channel never trains faster. The LMS iteration
  count is one of the step counts the reset-to-L0 time is built from, so more
  loss must never need fewer iterations in expectation (means over a handful of
  links, with a tolerance for sampling noise).
* ``phy.eq_level3``: a device profile that skips phase 3 (the faulty-device
  witness) yields an EQ record whose phase 3 did not run, so the clause can
  see it; a correct profile on the same channel runs all four phases.
"""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sitssim.phy.channel import ChannelProfile
from sitssim.phy.equalizer import EqProfile, level3_eq, train_rx_equalizer

_LINKS = 6
_EQ = EqProfile(max_phase1_blocks=200)


def _mean_iterations(loss_db: float, snr_db: float, seed: int) -> float:
    channel = ChannelProfile(loss_db=loss_db, snr_db=snr_db, rj_rms_ui=0.01)
    training = train_rx_equalizer(channel, np.random.default_rng(seed), n_links=_LINKS, eq=_EQ)
    return float(np.mean(training.iterations))


@given(
    loss_db=st.floats(min_value=0.0, max_value=14.0),
    extra_db=st.floats(min_value=2.0, max_value=6.0),
    snr_db=st.floats(min_value=26.0, max_value=34.0),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_more_loss_never_needs_fewer_lms_iterations(
    loss_db: float, extra_db: float, snr_db: float, seed: int
) -> None:
    """phy.reset_to_l0: mean LMS iterations do not drop when the loss grows."""
    low = _mean_iterations(loss_db, snr_db, seed)
    high = _mean_iterations(loss_db + extra_db, snr_db, seed + 1)
    assert high >= low - (1.0 + 0.15 * low)


@given(
    loss_db=st.floats(min_value=0.0, max_value=12.0),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_skipping_phase3_is_visible_in_the_eq_record(loss_db: float, seed: int) -> None:
    """phy.eq_level3: the faulty profile's record says phase 3 did not run."""
    channel = ChannelProfile(loss_db=loss_db, snr_db=30.0, rj_rms_ui=0.01)
    (faulty,) = level3_eq(channel, np.random.default_rng(seed), eq=EqProfile(skip_phase3=True))
    assert [p.ran for p in faulty.phases] == [True, True, True, False]
    assert faulty.phases[3].iterations == 0
    assert not faulty.completed
    (correct,) = level3_eq(channel, np.random.default_rng(seed), eq=EqProfile())
    assert all(p.ran for p in correct.phases)
    assert correct.completed
