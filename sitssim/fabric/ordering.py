"""L3 transaction ordering: the PCIe ordering table and a requester's reorder buffer (sans-I/O).

Theory of operation
-------------------
Every TLP belongs to one of three classes: posted requests (P, memory
writes), non-posted requests (NP, reads) and completions (Cpl), the same
``FcClass`` that flow control keeps its credits by. The PCIe Base
Specification's ordering table ("Ordering Rules Summary") answers, for a TLP
that arrived *later* at an egress queue (the row), whether it may pass one
queued *earlier* (the column):

============ =========================== ============ =====================
later \\ ear. P                           NP           Cpl
============ =========================== ============ =====================
P            No (A2a); RO or IDO* (A2b)  Yes (A3/A4)  Y/N (A5a)
NP           No (B2a); IDO* (B2b)        Y/N (B3/B4)  Y/N (B5)
Cpl          No (D2a); RO or IDO** (D2b) Yes (D3/D4)  Y/N (D5a); No if the
                                                      same transaction (D5b)
============ =========================== ============ =====================

"Yes" means the later TLP must be *able* to pass (deadlock avoidance), "Y/N"
that it is permitted to, "No" that it must not. The relaxations are read from
the later TLP's attributes: * IDO applies when the two requester IDs differ;
** a completion's IDO applies when its completer ID differs from the posted
request's requester ID. Relaxed ordering does not let a read pass a posted
write (B2b is ID-based only): that is what makes a read "flush" earlier writes.

``EgressQueue`` keeps pending TLPs in arrival (program) order and releases,
at each decision, every TLP that is ready and may pass every TLP still queued
ahead of it; a TLP held back by something other than ordering (an address not
yet translated, no free reorder-buffer tag) is still "ahead" of the TLPs
behind it. Since every "Yes" and "Y/N" cell is taken, posted writes always get
past stalled reads, as A3/A4 require.

``ReorderBuffer`` is a requester's table of outstanding reads: a read takes a
tag when issued, its completion may arrive in any order, and completions are
released to the requester strictly in issue order; a tag is free again only
at release. With every tag in use no read can be issued.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sitssim.link.credits import FcClass


class Pass(enum.Enum):
    """A cell of the ordering table."""

    NO = "No"
    MAY = "Y/N"
    MUST = "Yes"


P, NP, CPL = FcClass.P, FcClass.NP, FcClass.CPL

# (later, earlier) -> (base rule, attributes of the later TLP that turn "No" into "Y/N")
ORDERING_TABLE: dict[tuple[FcClass, FcClass], tuple[Pass, frozenset[str]]] = {
    (P, P): (Pass.NO, frozenset({"ro", "ido"})),
    (P, NP): (Pass.MUST, frozenset()),
    (P, CPL): (Pass.MAY, frozenset()),
    (NP, P): (Pass.NO, frozenset({"ido"})),
    (NP, NP): (Pass.MAY, frozenset()),
    (NP, CPL): (Pass.MAY, frozenset()),
    (CPL, P): (Pass.NO, frozenset({"ro", "ido"})),
    (CPL, NP): (Pass.MUST, frozenset()),
    (CPL, CPL): (Pass.MAY, frozenset()),
}


@dataclass(frozen=True, slots=True)
class Tlp:
    """What the ordering rules look at; ``transaction`` ties a completion to its request."""

    txn_id: int
    cls: FcClass
    requester_id: int = 0
    ro: bool = False
    ido: bool = False
    completer_id: int = -1
    transaction: int = -1


def pass_rule(later: Tlp, earlier: Tlp) -> Pass:
    """The ordering table's answer for ``later`` overtaking ``earlier``, relaxations applied."""
    base, relaxations = ORDERING_TABLE[(later.cls, earlier.cls)]
    if later.cls is CPL and earlier.cls is CPL:
        same = later.transaction >= 0 and later.transaction == earlier.transaction
        return Pass.NO if same else Pass.MAY
    if base is not Pass.NO:
        return base
    if "ro" in relaxations and later.ro:
        return Pass.MAY
    if "ido" in relaxations and later.ido:
        own_id = later.completer_id if later.cls is CPL else later.requester_id
        if own_id != earlier.requester_id:
            return Pass.MAY
    return Pass.NO


def may_pass(later: Tlp, earlier: Tlp) -> bool:
    return pass_rule(later, earlier) is not Pass.NO


class EgressQueue:
    """Pending TLPs at one egress, in arrival order (see the module docstring)."""

    def __init__(self) -> None:
        self._pending: list[Tlp] = []

    def __len__(self) -> int:
        return len(self._pending)

    def push(self, tlp: Tlp) -> None:
        self._pending.append(tlp)

    def issue(self, can_issue: Callable[[Tlp], bool]) -> list[Tlp]:
        """Remove and return, in order, every TLP that ``can_issue`` and ordering allow now.

        ``can_issue`` is asked only about TLPs that ordering lets go, in queue
        order, so it may take resources (a reorder-buffer tag) as it says yes.
        """
        issued: list[Tlp] = []
        kept: list[Tlp] = []
        # ``pass_rule`` reads only these fields of the earlier TLP, so one representative
        # per distinct key stands for all the kept ones: a scan stays linear in the queue.
        ahead: dict[tuple[FcClass, int, int], Tlp] = {}
        for tlp in self._pending:
            if all(may_pass(tlp, e) for e in ahead.values()) and can_issue(tlp):
                issued.append(tlp)
            else:
                kept.append(tlp)
                ahead.setdefault((tlp.cls, tlp.requester_id, tlp.transaction), tlp)
        self._pending = kept
        return issued


class RobFullError(RuntimeError):
    pass


class ReorderBuffer:
    """Tags for outstanding reads; completions leave in issue order (module docstring)."""

    def __init__(self, depth: int) -> None:
        if depth < 1:
            raise ValueError("a reorder buffer needs at least one entry")
        self.depth = depth
        self._free: deque[int] = deque(range(depth))
        self._order: deque[int] = deque()
        self._txn_of: dict[int, int] = {}
        self._done: set[int] = set()

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def outstanding(self) -> int:
        return self.depth - len(self._free)

    def allocate(self, txn_id: int) -> int:
        """Give a read a tag at issue."""
        if not self._free:
            raise RobFullError(f"no free tag for transaction {txn_id}: all {self.depth} in use")
        tag = self._free.popleft()
        self._order.append(tag)
        self._txn_of[tag] = txn_id
        return tag

    def complete(self, tag: int) -> list[int]:
        """Record a tag's completion; return the transactions released by it, in issue order."""
        if tag not in self._txn_of or tag in self._done:
            raise ValueError(f"completion for tag {tag}, which is not outstanding")
        self._done.add(tag)
        released: list[int] = []
        while self._order and self._order[0] in self._done:
            head = self._order.popleft()
            self._done.discard(head)
            released.append(self._txn_of.pop(head))
            self._free.append(head)
        return released
