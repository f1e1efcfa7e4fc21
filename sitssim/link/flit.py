"""Flit layout, post-FEC flit error rates and failed-flit draws (L2).

Theory of operation
-------------------
A flit is a fixed 256-byte container, laid out as in PCIe 6.x flit mode: 236 bytes of TLP
space, 6 bytes of data-link payload (DLP: flit sequence number, Ack/Nak), an 8-byte CRC over
TLP + DLP, and 6 bytes of ECC. The ECC forms three byte-interleaved Reed–Solomon codewords
(flit byte ``b`` belongs to group ``b mod 3``) with two parity bytes each, so each group
corrects one byte (symbol) error. The layout is data (:class:`FlitLayout`); everything else,
payload efficiency included, is derived from it.

Bytes are striped across the lanes (byte ``b`` travels on lane ``b mod lanes``), so bytes
that follow one another *on a lane* are ``lanes`` apart in the flit. On the PCIe widths (x1,
x2, x4, x8, x16), none a multiple of three, they fall into different ECC groups: a burst up
to three lane-bytes long is still corrected. A width that does not divide 256 (an NVLink-style
x3 or x5) stripes the flit unevenly: lane ``l`` carries the bytes ``l, l + lanes, ...``, so
some lanes carry one byte more, and the next flit continues on the lane after the last byte
(no padding), so the link still moves ``lanes`` bytes per byte time. That offset only changes
which (independent, identical) lane carries which byte subset, so every flit has the rate
computed for the first. On a width that is a
multiple of three every byte of a lane lands in one ECC group, so a two-byte burst on a lane
is uncorrectable: the model computes that weaker protection, it does not refuse the width.
Errors on different lanes are independent.

Error model (:class:`BurstModel`). ``ber`` counts error *events*, as PCIe 6.x counts its
first-bit error rate (FBER): a PAM4 symbol (2 bits) starts a new event with probability
``q = 1 - (1 - ber)**2``. A receiver with decision-feedback equalisation feeds a wrong
decision back and so propagates an error into the lane's following symbols: each errored
symbol's error carries into the next symbol with probability ``p_propagate``, so burst
lengths are geometric in symbols (1 / (1 - p_propagate) on average). Every symbol a burst
covers counts as errored; precoding, which can clear a burst's interior, is not credited, so
the model errs on the pessimistic side. A byte is in error if any of its four symbols is.
Each lane is thus a two-state Markov chain over its symbols (a Gilbert-style burst channel).
This approximates the within-lane correlated (burst) errors and across-lane independence
assumed in the PCIe 6.0 FEC analysis (D. Das Sharma, "PCI Express 6.0 Specification: A
Low-Latency, High-Bandwidth, High-Reliability, and Cost-Effective Interconnect With 64.0
GT/s PAM-4 Signaling", IEEE Micro 41(1), 2021). ``p_propagate`` is a device parameter, not
a figure from that paper; ``p_propagate = 0`` gives independent symbol errors.

A flit fails the FEC when some group holds more byte errors than it can correct. Its
probability is computed exactly under the model by dynamic programming over each lane's
symbols (per-group byte-error counts, capped one above the correction limit), then combining
the independent lanes; failing mass is summed directly, never as ``1 - p_ok``, so tiny rates
keep their relative precision. The CRC then catches a failed flit except with probability
``2**-(8 * crc_bytes)`` (the random-pattern escape rate), and the caught flit is replayed.

Each flit's chain starts from its stationary state, so a burst running in from the previous
flit is counted in the per-flit rate; the correlation that such a burst creates between
neighbouring flits is ignored when failures are drawn. Failed flits in a burst are thus
independent draws: :func:`draw_failed_flits` draws the count from a binomial and the
positions without replacement, all at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "PCIE6_FLIT",
    "BurstModel",
    "FlitErrorRates",
    "FlitLayout",
    "draw_failed_flits",
    "flit_error_rates",
    "flit_time_ns",
    "flits_for_message",
    "payload_efficiency",
]

BITS_PER_BYTE = 8
_NO_ERRORS = 0  # DP state index with every group's count at zero


@dataclass(frozen=True)
class FlitLayout:
    """Byte budget of one flit. Defaults are the PCIe 6.x flit-mode layout (256 bytes)."""

    tlp_bytes: int = 236
    dlp_bytes: int = 6
    crc_bytes: int = 8
    ecc_bytes: int = 6
    ecc_groups: int = 3

    def __post_init__(self) -> None:
        for name in ("tlp_bytes", "dlp_bytes", "crc_bytes", "ecc_bytes", "ecc_groups"):
            if getattr(self, name) < 0:
                raise ValueError(f"FlitLayout.{name} must be >= 0, got {getattr(self, name)}")
        if self.ecc_groups < 1 or self.ecc_bytes % self.ecc_groups:
            raise ValueError(
                f"FlitLayout: {self.ecc_bytes} ECC bytes do not split evenly into "
                f"{self.ecc_groups} groups"
            )
        if self.tlp_bytes == 0:
            raise ValueError("FlitLayout.tlp_bytes must be > 0: a flit must carry payload")

    @property
    def total_bytes(self) -> int:
        """Flit size on the wire, bytes."""
        return self.tlp_bytes + self.dlp_bytes + self.crc_bytes + self.ecc_bytes

    @property
    def correctable_bytes_per_group(self) -> int:
        """Byte errors one ECC group corrects: a Reed–Solomon code with r parity symbols
        corrects floor(r / 2) symbol errors."""
        return (self.ecc_bytes // self.ecc_groups) // 2

    @property
    def crc_escape_probability(self) -> float:
        """Probability that a random corrupted flit passes the CRC."""
        return 2.0 ** -(BITS_PER_BYTE * self.crc_bytes)

    def group_of_byte(self) -> NDArray[np.int64]:
        """ECC group of every flit byte (byte-interleaved: byte b -> b mod ecc_groups)."""
        return np.arange(self.total_bytes, dtype=np.int64) % self.ecc_groups


PCIE6_FLIT = FlitLayout()


def payload_efficiency(layout: FlitLayout = PCIE6_FLIT) -> float:
    """Fraction of wire bytes that carry TLP payload when no flit is replayed."""
    return layout.tlp_bytes / layout.total_bytes


def flits_for_message(n_bytes: int, layout: FlitLayout = PCIE6_FLIT) -> int:
    """Flits needed to carry ``n_bytes`` of TLP bytes (headers included by the caller)."""
    if n_bytes < 0:
        raise ValueError(f"message size must be >= 0 bytes, got {n_bytes}")
    return -(-n_bytes // layout.tlp_bytes)


def flit_time_ns(lanes: int = 16, gt_per_s: float = 64.0, layout: FlitLayout = PCIE6_FLIT) -> float:
    """Serialisation time of one flit, ns, on ``lanes`` lanes at ``gt_per_s`` GT/s per lane
    (one bit per transfer per lane: 64 GT/s PAM4 is 32 GBd x 2 bits)."""
    if lanes < 1 or gt_per_s <= 0:
        raise ValueError(f"need lanes >= 1 and gt_per_s > 0, got {lanes}, {gt_per_s}")
    return layout.total_bytes * BITS_PER_BYTE / (lanes * gt_per_s)


@dataclass(frozen=True)
class BurstModel:
    """Within-lane error correlation of a PAM4 link (see the module docstring).

    ``p_propagate``: probability that an errored symbol's error carries into the lane's next
    symbol (decision-feedback error propagation); burst lengths are geometric in symbols.
    ``lanes``: link width (any width; one that does not divide the flit stripes it unevenly,
    see the module docstring). ``bits_per_symbol``: 2 for PAM4.
    """

    p_propagate: float = 0.5
    lanes: int = 16
    bits_per_symbol: int = 2

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_propagate < 1.0:
            raise ValueError(f"BurstModel.p_propagate must be in [0, 1), got {self.p_propagate}")
        if self.lanes < 1:
            raise ValueError(f"BurstModel.lanes must be >= 1, got {self.lanes}")
        if self.bits_per_symbol < 1 or BITS_PER_BYTE % self.bits_per_symbol:
            raise ValueError(
                f"BurstModel.bits_per_symbol must divide {BITS_PER_BYTE}, got "
                f"{self.bits_per_symbol}"
            )

    @property
    def symbols_per_byte(self) -> int:
        return BITS_PER_BYTE // self.bits_per_symbol


@dataclass(frozen=True)
class FlitErrorRates:
    """Per-flit outcome probabilities; each array has the shape of the ``ber`` given.

    ``p_corrected``: at least one byte error, all fixed by the FEC. ``p_fec_fail``: some group
    has more byte errors than it corrects. ``p_replay``: the CRC detects the failure and the
    flit is replayed. ``p_undetected``: the failure escapes the CRC (silent corruption).
    """

    ber: NDArray[np.float64]
    p_corrected: NDArray[np.float64]
    p_fec_fail: NDArray[np.float64]
    p_replay: NDArray[np.float64]
    p_undetected: NDArray[np.float64]


class _GroupCounts:
    """Index algebra of the DP state: per-group byte-error counts, each capped at ``cap``."""

    def __init__(self, groups: int, cap: int) -> None:
        shape = (cap + 1,) * groups
        self.size = (cap + 1) ** groups
        counts = np.array(np.unravel_index(np.arange(self.size), shape)).T
        self.failing = (counts >= cap).any(axis=1)
        self.any_error = counts.sum(axis=1) > 0
        # One more error in group g moves state i to bump[g][i].
        self.bump: list[NDArray[np.intp]] = []
        for g in range(groups):
            bumped = counts.copy()
            bumped[:, g] = np.minimum(bumped[:, g] + 1, cap)
            self.bump.append(np.ravel_multi_index(tuple(bumped.T), shape))
        # Independent error sets in states i and j together are in state combined[i, j].
        summed = np.minimum(counts[:, None, :] + counts[None, :, :], cap)
        combined = np.ravel_multi_index(tuple(np.moveaxis(summed, -1, 0)), shape)
        i, j = np.indices((self.size, self.size))
        self.combine_onehot = np.zeros((self.size, self.size, self.size))
        self.combine_onehot[i, j, combined] = 1.0

    def add_error(self, dist: NDArray[np.float64], group: int) -> NDArray[np.float64]:
        """``dist`` with one more byte error in ``group``."""
        out = np.zeros_like(dist)
        np.add.at(out, (slice(None), self.bump[group]), dist)
        return out


def _lane_distribution(
    groups_on_lane: tuple[int, ...],
    q: NDArray[np.float64],
    keep_ok: NDArray[np.float64],
    burst: BurstModel,
    algebra: _GroupCounts,
) -> NDArray[np.float64]:
    """Distribution (batch x states) of capped per-group byte-error counts on one lane.

    The chain runs over the lane's symbols; ``q`` / ``keep_ok`` are the per-symbol
    probabilities (batch,) that an error event does / does not start there.
    """
    rho = burst.p_propagate
    err_after_err = (rho + (1.0 - rho) * q)[:, None]
    ok_after_err = ((1.0 - rho) * keep_ok)[:, None]
    err_after_ok = q[:, None]
    ok_after_ok = keep_ok[:, None]
    # Stationary start, so a burst running in from the previous flit is counted.
    norm = (1.0 - rho) * keep_ok + q
    prev_ok = np.zeros((q.shape[0], algebra.size))
    prev_err = np.zeros_like(prev_ok)
    prev_ok[:, _NO_ERRORS] = (1.0 - rho) * keep_ok / norm
    prev_err[:, _NO_ERRORS] = q / norm
    for group in groups_on_lane:
        # "clean": none of this byte's symbols has erred yet; "hit": one has. The suffix is
        # the state of the previous symbol (for a clean byte, an error there can only be the
        # last symbol of the byte before).
        clean_ok, clean_err = prev_ok, prev_err
        hit_ok = hit_err = np.zeros_like(prev_ok)
        for _ in range(burst.symbols_per_byte):
            clean_ok, clean_err, hit_ok, hit_err = (
                clean_ok * ok_after_ok + clean_err * ok_after_err,
                np.zeros_like(prev_ok),
                hit_ok * ok_after_ok + hit_err * ok_after_err,
                (clean_ok + hit_ok) * err_after_ok + (clean_err + hit_err) * err_after_err,
            )
        prev_ok = clean_ok + algebra.add_error(hit_ok, group)
        prev_err = algebra.add_error(hit_err, group)
    return prev_ok + prev_err


def flit_error_rates(
    ber: ArrayLike, burst: BurstModel | None = None, layout: FlitLayout = PCIE6_FLIT
) -> FlitErrorRates:
    """Per-flit FEC outcome probabilities from the pre-FEC error-event rate ``ber``
    (vectorised over ``ber``). See the module docstring for the model."""
    burst = burst if burst is not None else BurstModel()
    ber_arr = np.asarray(ber, dtype=np.float64)
    if np.any(np.isnan(ber_arr)) or np.any(ber_arr < 0.0) or np.any(ber_arr >= 1.0):
        raise ValueError("ber must be in [0, 1)")
    flat = ber_arr.reshape(-1)
    # Per symbol: no error event starts in any of its bits (keep_ok) / one does (q).
    log_keep = burst.bits_per_symbol * np.log1p(-flat)
    keep_ok = np.exp(log_keep)
    q = -np.expm1(log_keep)
    algebra = _GroupCounts(layout.ecc_groups, layout.correctable_bytes_per_group + 1)
    group = layout.group_of_byte()
    # Lanes whose bytes visit the groups in the same order share one distribution.
    per_pattern: dict[tuple[int, ...], NDArray[np.float64]] = {}
    total = np.zeros((flat.shape[0], algebra.size))
    total[:, _NO_ERRORS] = 1.0
    for lane in range(burst.lanes):
        pattern = tuple(int(g) for g in group[lane :: burst.lanes])
        if pattern not in per_pattern:
            per_pattern[pattern] = _lane_distribution(pattern, q, keep_ok, burst, algebra)
        total = np.einsum("bi,bj,ijk->bk", total, per_pattern[pattern], algebra.combine_onehot)
    p_fail = total[:, algebra.failing].sum(axis=1)
    p_corrected = total[:, algebra.any_error & ~algebra.failing].sum(axis=1)
    escape = layout.crc_escape_probability
    shape = ber_arr.shape
    return FlitErrorRates(
        ber=ber_arr,
        p_corrected=p_corrected.reshape(shape),
        p_fec_fail=p_fail.reshape(shape),
        p_replay=(p_fail * (1.0 - escape)).reshape(shape),
        p_undetected=(p_fail * escape).reshape(shape),
    )


def draw_failed_flits(rng: np.random.Generator, n_flits: int, p_fail: float) -> NDArray[np.int64]:
    """Indices (sorted, 0-based) of the flits of an ``n_flits`` burst that fail, each failing
    independently with probability ``p_fail``: one binomial draw for the count, one draw of
    distinct positions."""
    if n_flits < 0:
        raise ValueError(f"n_flits must be >= 0, got {n_flits}")
    if not 0.0 <= p_fail <= 1.0 or math.isnan(p_fail):
        raise ValueError(f"p_fail must be in [0, 1], got {p_fail}")
    count = int(rng.binomial(n_flits, p_fail))
    if count == 0:
        return np.empty(0, dtype=np.int64)
    positions = rng.choice(n_flits, size=count, replace=False)
    return np.sort(positions.astype(np.int64))
