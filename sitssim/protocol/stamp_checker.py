"""The receiver's check of SITS timestamps on TS1/TS2 ordered sets (``link.ts_injection``).

The receiver checks each direction with a :class:`StampChecker`, a two-state machine
(``AWAITING_FIRST`` → ``TRACKING``) over the sets in arrival order: every set must carry a
stamp, and every stamp must be strictly greater than the previous stamp received on that
direction. A set without a stamp is flagged and leaves the reference unchanged; a stamp
that is not above the previous one is flagged and becomes the new reference, so one
backward step of the sender's clock is one violation.

The ordered sets themselves are made by :mod:`sitssim.link.ordered_sets`; the check is here,
below the model, because the clause's judge runs it over the recorded ``ordered_sets`` table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from enum import Enum


class CheckerState(Enum):
    AWAITING_FIRST = "awaiting_first"
    TRACKING = "tracking"


class Finding(Enum):
    OK = "ok"
    NO_STAMP = "no_stamp"
    NOT_MONOTONIC = "not_monotonic"


# (state, set carries a stamp, stamp above the reference) -> (finding, next state, take stamp).
# "above" is irrelevant (None) where no reference exists or no stamp was sent.
_TRANSITIONS: dict[tuple[CheckerState, bool, bool | None], tuple[Finding, CheckerState, bool]] = {
    (CheckerState.AWAITING_FIRST, False, None): (
        Finding.NO_STAMP,
        CheckerState.AWAITING_FIRST,
        False,
    ),
    (CheckerState.AWAITING_FIRST, True, None): (Finding.OK, CheckerState.TRACKING, True),
    (CheckerState.TRACKING, False, None): (Finding.NO_STAMP, CheckerState.TRACKING, False),
    (CheckerState.TRACKING, True, True): (Finding.OK, CheckerState.TRACKING, True),
    (CheckerState.TRACKING, True, False): (Finding.NOT_MONOTONIC, CheckerState.TRACKING, True),
}


class StampChecker:
    """The receiver's check of one link direction (see the module docstring)."""

    __slots__ = ("last_stamp", "state")

    def __init__(self) -> None:
        self.state = CheckerState.AWAITING_FIRST
        self.last_stamp: float | None = None

    def receive(self, stamp: float | None) -> Finding:
        """Feed the next ordered set's stamp (``None`` or NaN: the set carried none)."""
        stamped = stamp is not None and not math.isnan(stamp)
        above = None
        if stamped and self.state is CheckerState.TRACKING:
            above = stamp > self.last_stamp
        finding, self.state, take = _TRANSITIONS[(self.state, stamped, above)]
        if take:
            self.last_stamp = stamp
        return finding


def check_directions(directions: Iterable[object], stamps: Iterable[float]) -> list[Finding]:
    """Run one checker per direction over sets given in arrival order within each direction."""
    checkers: dict[object, StampChecker] = {}
    findings = []
    for direction, stamp in zip(directions, stamps, strict=True):
        checker = checkers.get(direction)
        if checker is None:
            checker = checkers[direction] = StampChecker()
        findings.append(checker.receive(stamp))
    return findings
