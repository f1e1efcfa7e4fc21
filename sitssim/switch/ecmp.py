"""Weighted ECMP with flow hashing (clause ``switch.ecmp_weight``), sans-I/O core.

Theory of operation
-------------------
*Groups.* Where a node has several next hops on shortest paths to a message's destination
(``TableRouting.candidates``), those next hops are an equal-cost group and the node is an
ECMP *stage*. A node with one next hop is not a stage: the message takes that hop.

*Weights.* Each member of a group (the channel from the node to one next hop) has an
integer weight, given explicitly or, per SPEC reading 1, implicitly from what the device
measures of the link::

    weight = max(1, ifSpeed / 1e9 - int(2 * lldp_delay_ms))       (implicit_weight)

``ifSpeed`` is the port's *negotiated* line rate in bit/s, as IF-MIB's ifSpeed and
ifHighSpeed report it: lanes trained x rate per lane, before any encoding overhead
(:func:`negotiated_if_speed_bps`). The PHY records a trained link as ``lanes`` and
``rate_gts`` (``phy.links.PhyLink``, the ``phy_links`` table), ``rate_gts`` being
transfers per second per lane in units of 1e9 with one bit per transfer per lane (64 GT/s
PAM4 is 32 GBd x 2 bits, ``link.flit.flit_time_ns``), so a link trained to fewer lanes or
a lower rate weighs less. Weights are integers, as a WCMP table's are, so ifSpeed / 1e9 is
taken in whole Gbit/s (rounded down); every standard line rate is a whole number of Gbit/s.
A group whose members have no weight given splits evenly (each weighs 1); a group with
weights for some members and not others is a configuration error, refused at construction.

*Flow hashing.* A message's *flow key* is a 64-bit mix (:func:`flow_key`, splitmix64's
finaliser, pure integer arithmetic) of the configured fields of its row (for example
``("src", "dst", "tenant")``, names of the transport's per-message columns). Python's
``hash()`` is salted per process, so it is never used: the key is the same on every run
and platform. At each stage the key is mixed once more with the stage's 64-bit seed
(:func:`flow_hash`), and the hash picks a member in proportion to the weights
(:func:`weighted_member`): the hash is scaled onto ``[0, sum of weights)`` by a
multiply-shift and looked up in the cumulative weights, so member ``i`` owns a fraction
``w_i / sum(w)`` of the hash space, exactly to within 2**-64. The choice is a pure
function of (the hashed fields, the stage seed, the weights): every message of a flow
takes the same member at a stage, hence the same path, and is never reordered by ECMP.

*Stage seeds.* Each stage's seed is derived from one seed and the node's name
(:func:`stage_seed`, BLAKE2b, stable across processes). With ``equal_stage_seeds`` every
stage uses the same seed, as switches of one vendor shipped with one default seed do:
then two consecutive stages hash a flow identically, the second stage's choice is a
function of the first's, and traffic polarises (a switch reached through member ``i`` of
the previous stage sends everything it gets to its own member ``i`` when its group has
the same weights, leaving the others idle).

*Faulty device.* A device that ignores its weights (``ignore_weights`` for every stage, or
``faulty_nodes`` for some) hashes uniformly over the group's members, as if all weighed
1: the clause's failing witness, since unequal weights then get equal shares.

*Path ranks.* :class:`EcmpRouting` wraps the fabric's :class:`TableRouting` on the per-hop
routing seam (``fabric.nodes.RoutingFunction``). The base keeps a message on its ranked
path by reducing the rank drawn at the source at every node with several next hops; a node
with one next hop returns it without reading the rank. ECMP chooses at exactly the nodes
where the rank would be read, so the rank plays no part in the route; every injection is
still passed through the base, whose per-message columns are indexed by message. Because
the next-hop tables enumerate a pair's shortest paths by cumulative path counts, the rank
of the path an ECMP message takes is the sum, over its stages, of the path counts of the
members before the one chosen: :attr:`EcmpRouting.rank` keeps that sum per message, and
``RouteTables.path(src, dst, rank)`` is the path a delivered message crossed. A pinning
``Router`` lists only a pair's pinned path among its routes, so to name ECMP paths by
route id (``Router.route_ids(src, dst, ecmp.rank)``) the router must list every tied path
of a pair, as a spraying one does (``Router(fabric, spray=True)``; its rotation of ranks
at the source then moves nothing, since ECMP reads no rank).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from hashlib import blake2b
from itertools import accumulate
from typing import TYPE_CHECKING, NamedTuple

from sitssim.fabric.route_tables import Entry
from sitssim.fabric.routing import TableRouting

if TYPE_CHECKING:
    from collections.abc import Iterable

    from sitssim.fabric.nodes import Node
    from sitssim.fabric.ports import OutputPort

MASK64 = (1 << 64) - 1
GBIT = 1_000_000_000
DEFAULT_FIELDS = ("src", "dst", "tenant")

# splitmix64 (Steele, Lea and Flood 2014; Vigna's constants): a bijection of 64-bit words
# whose every output bit depends on every input bit.
_GOLDEN = 0x9E3779B97F4A7C15
_MUL1 = 0xBF58476D1CE4E5B9
_MUL2 = 0x94D049BB133111EB


def negotiated_if_speed_bps(lanes: int, gt_per_lane: float) -> int:
    """A port's negotiated line rate in bit/s, as IF-MIB ifSpeed reports it: ``lanes``
    trained, at ``gt_per_lane`` GT/s each (one bit per transfer per lane, as the PHY
    records ``rate_gts``), before encoding overhead."""
    if lanes < 1 or not gt_per_lane > 0:
        raise ValueError(f"need lanes >= 1 and a rate > 0 GT/s, got {lanes}, {gt_per_lane}")
    return round(lanes * gt_per_lane * GBIT)


def implicit_weight(if_speed_bps: int, lldp_delay_ms: float) -> int:
    """The implicit ECMP weight of SPEC ``switch.ecmp_weight``:
    ``max(1, ifSpeed / 1e9 - int(2 * lldp_delay_ms))``, ifSpeed in whole Gbit/s."""
    if if_speed_bps < 0 or not lldp_delay_ms >= 0:
        raise ValueError(
            f"need ifSpeed >= 0 bit/s and an LLDP delay >= 0 ms, got {if_speed_bps}, "
            f"{lldp_delay_ms}"
        )
    return max(1, int(if_speed_bps // GBIT) - int(2 * lldp_delay_ms))


class ImplicitWeight(NamedTuple):
    """A member weighted from what its device measured: negotiated ifSpeed (bit/s) and
    LLDP delay (ms)."""

    if_speed_bps: int
    lldp_delay_ms: float

    @property
    def weight(self) -> int:
        return implicit_weight(self.if_speed_bps, self.lldp_delay_ms)


def mix64(x: int) -> int:
    """splitmix64's step: a 64-bit word to a well-mixed 64-bit word."""
    z = (x + _GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * _MUL1) & MASK64
    z = ((z ^ (z >> 27)) * _MUL2) & MASK64
    return z ^ (z >> 31)


def flow_key(values: Iterable[int]) -> int:
    """A flow's 64-bit key from its hashed fields, in order (each taken modulo 2**64)."""
    h = 0
    for v in values:
        h = mix64(h ^ (v & MASK64))
    return h


def flow_hash(key: int, seed: int) -> int:
    """The 64-bit hash a stage with ``seed`` computes of the flow with ``key``."""
    return mix64(key ^ (seed & MASK64))


def stage_seed(seed: int, node: str) -> int:
    """The 64-bit hash seed of the stage at ``node``, derived from one ``seed``."""
    digest = blake2b(f"{seed}/{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def weighted_member(h: int, cumulative: Sequence[int]) -> int:
    """The member a 64-bit hash ``h`` picks, members owning shares of the hash space in
    proportion to their weights (``cumulative``: running totals of the weights)."""
    return bisect_right(cumulative, (h * cumulative[-1]) >> 64)


class QueuePairs(Sequence[int]):
    """A per-message column: the queue pair each message of a connection (its ``src``,
    ``dst`` and ``tenant``) goes on, the connection's messages dealt round robin over
    ``count`` queue pairs in the order they are numbered, as an RDMA transport stripes one
    connection over several QPs (RoCEv2 puts the QP in the UDP source port, which switches
    hash). A message's queue pair is drawn when it is first read: the hash reads it at
    the message's source, where messages are routed in the order they are numbered."""

    __slots__ = ("_columns", "_count", "_next", "_values")

    def __init__(self, columns: Mapping[str, Sequence[int]], count: int) -> None:
        if count < 1:
            raise ValueError(f"need at least one queue pair, got {count}")
        self._columns = (columns["src"], columns["dst"], columns["tenant"])
        self._count = count
        self._next: dict[tuple[int, int, int], int] = {}
        self._values: list[int] = []

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, msg: int) -> int:  # type: ignore[override]
        values = self._values
        while len(values) <= msg:
            i = len(values)
            connection = (self._columns[0][i], self._columns[1][i], self._columns[2][i])
            qp = self._next.get(connection, 0)
            self._next[connection] = (qp + 1) % self._count
            values.append(qp)
        return values[msg]


class _Group(NamedTuple):
    """What a stage needs of one group, towards the destinations that share it: the
    members' cumulative weights, each member's rank offset (shortest paths through the
    members before it) and the stage's seed."""

    cumulative: tuple[int, ...]
    offsets: tuple[int, ...]
    seed: int


class EcmpRouting:
    """Weighted ECMP over ``base``'s next-hop tables (module docstring).

    ``columns`` maps the engine's per-message column names to the columns (the
    transport's ``src``, ``dst``, ``tenant``... lists, read as they grow); ``fields`` names
    the ones hashed. ``weights`` maps (node, next hop), a channel by its ends, to an
    explicit weight or an :class:`ImplicitWeight`. ``seed`` derives each stage's seed, or
    is the one seed of every stage with ``equal_stage_seeds``. ``ignore_weights`` makes
    every stage, ``faulty_nodes`` the named ones, hash uniformly over their members.
    ``rank`` is each message's path rank, as ``TableRouting.rank`` is (module docstring).
    """

    __slots__ = (
        "_equal_seeds",
        "_fields",
        "_groups",
        "_key",
        "_seed",
        "_uniform",
        "_weights",
        "base",
        "rank",
    )

    def __init__(
        self,
        base: TableRouting,
        columns: Mapping[str, Sequence[int]],
        *,
        fields: Sequence[str] = DEFAULT_FIELDS,
        weights: Mapping[tuple[str, str], int | ImplicitWeight] | None = None,
        seed: int = 0,
        equal_stage_seeds: bool = False,
        ignore_weights: bool = False,
        faulty_nodes: Collection[str] = (),
    ) -> None:
        self.base = base
        tables = base.router.tables
        if not fields:
            raise ValueError("ECMP needs at least one hashed field")
        unknown = [f for f in fields if f not in columns]
        if unknown:
            raise ValueError(f"no per-message column {unknown[0]!r}; columns: {sorted(columns)}")
        self._fields = tuple(columns[f] for f in fields)
        strangers = sorted(set(faulty_nodes) - set(tables.number))
        if strangers:
            raise ValueError(f"faulty node {strangers[0]!r} is not a node of the fabric")
        self._uniform = frozenset(
            range(len(tables.names)) if ignore_weights else (tables.number[n] for n in faulty_nodes)
        )
        self._seed = seed & MASK64
        self._equal_seeds = equal_stage_seeds
        self._weights = self._channel_weights(weights or {})
        self._key: list[int] = []
        self.rank: list[int] = []
        # Per node: its groups by next-hop table entry. Entries are interned by the route
        # tables and live as long as they do, so an entry's identity names it, and a hop
        # looks its group up without hashing the entry's tuples.
        self._groups: list[dict[int, _Group]] = [{} for _ in tables.names]
        # A partly weighted group is refused now, not on the first message through it.
        weighted = {tables.number[ch[0]] for ch in weights or {}}
        for here in sorted(weighted):
            for d in range(len(tables.names)):
                entry = tables.table(d)[here]
                if len(entry[0]) > 1:
                    self._group(here, entry)

    def _channel_weights(
        self, weights: Mapping[tuple[str, str], int | ImplicitWeight]
    ) -> dict[int, int]:
        index = self.base.router.fabric.channel_index
        out = {}
        for (node, hop), given in weights.items():
            channel = index.get((node, hop))
            if channel is None:
                raise ValueError(f"ECMP weight for {node}>{hop}: no such channel")
            weight = given.weight if isinstance(given, ImplicitWeight) else given
            if weight < 1:
                raise ValueError(f"ECMP weight for {node}>{hop} must be >= 1, got {weight}")
            out[channel] = weight
        return out

    def _group(self, here: int, entry: Entry) -> _Group:
        found = self._groups[here].get(id(entry))
        if found is not None:
            return found
        tables = self.base.router.tables
        names = tables.names
        index = self.base.router.fabric.channel_index
        hops, totals = entry
        given = [self._weights.get(index[(names[here], names[h])]) for h in hops]
        if here in self._uniform or all(w is None for w in given):
            cumulative = tuple(range(1, len(hops) + 1))
        elif any(w is None for w in given):
            missing = [names[h] for h, w in zip(hops, given, strict=True) if w is None]
            raise ValueError(
                f"ECMP group of {names[here]} over {', '.join(names[h] for h in hops)}: "
                f"weights given for some members but not {', '.join(missing)}"
            )
        else:
            cumulative = tuple(accumulate(w for w in given if w is not None))
        seed = self._seed if self._equal_seeds else stage_seed(self._seed, names[here])
        group = _Group(cumulative, (0, *totals[:-1]), seed)
        self._groups[here][id(entry)] = group
        return group

    def connect(self, ports: Sequence[OutputPort]) -> None:
        """``ports[c]`` is channel ``c``'s output port: connects the base (its tables)."""
        self.base.connect(ports)

    def route(self, node: Node, msg: int, in_port: OutputPort | None) -> OutputPort:
        base = self.base
        if in_port is None:
            # Messages are routed at their source in the order they are numbered, so the
            # per-message lists grow by one here; the base draws its rank as it would alone.
            self._key.append(flow_key([column[msg] for column in self._fields]))
            self.rank.append(0)
            base.route(node, msg, None)
        ports = base.candidates(node, msg)
        if len(ports) == 1:
            # What the base returns at a node with one next hop, without reading the rank.
            return ports[0]
        here = node.index
        group = self._group(here, base.router.tables.table(base.dst[msg])[here])
        cumulative = group.cumulative
        # weighted_member(flow_hash(key, seed), cumulative), inlined: this runs per hop.
        i = bisect_right(cumulative, (mix64(self._key[msg] ^ group.seed) * cumulative[-1]) >> 64)
        self.rank[msg] += group.offsets[i]
        return ports[i]

    def candidates(self, node: Node, msg: int) -> tuple[OutputPort, ...]:
        return self.base.candidates(node, msg)
