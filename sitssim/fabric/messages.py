"""Every message kind of a run, and the flow-control class each one travels in.

One table for every layer, so that no two layers take the same code and no kind can
exist without saying how it is flow-controlled: a kind's class is a required field of
its row, checked when this module is imported. (Before, classes came from a side table
of exceptions, and a kind missing from it silently travelled as posted.)

A kind's code is its row's position in :data:`MESSAGE_KINDS`; the hot path carries codes
as plain ints and indexes the per-code tuples below, never the rows themselves.
Reads are non-posted and their completions are completions, as in PCIe; writes and
everything fire-and-forget are posted.
"""

from __future__ import annotations

from dataclasses import dataclass

from sitssim.link.credits import FcClass


@dataclass(frozen=True)
class MessageKind:
    """One kind of message: its name in the run's tables and its flow-control class."""

    name: str
    fc_class: FcClass

    def __post_init__(self) -> None:
        if not isinstance(self.fc_class, FcClass):
            raise TypeError(
                f"message kind {self.name!r} needs a flow-control class (an FcClass), "
                f"not {self.fc_class!r}"
            )


MESSAGE_KINDS: tuple[MessageKind, ...] = (
    MessageKind("data", FcClass.P),
    MessageKind("probe_request", FcClass.NP),
    MessageKind("probe_completion", FcClass.CPL),
    MessageKind("clock_sync", FcClass.P),
    MessageKind("fence", FcClass.P),
    MessageKind("collective", FcClass.P),
    MessageKind("txn_write", FcClass.P),
    MessageKind("txn_read", FcClass.NP),
    MessageKind("txn_completion", FcClass.CPL),
    MessageKind("tenant_request", FcClass.NP),
    MessageKind("tenant_response", FcClass.CPL),
    # A link-local control frame (LLDP), fire and forget as every such frame is.
    MessageKind("lldp", FcClass.P),
    # A copy's writes to a peer GPU's memory (cudaMemcpyPeer), posted as every write is.
    MessageKind("peer_copy", FcClass.P),
)

KIND_NAMES: tuple[str, ...] = tuple(k.name for k in MESSAGE_KINDS)
if len(set(KIND_NAMES)) != len(KIND_NAMES):
    raise ValueError(f"message kind names repeat: {KIND_NAMES}")

# Each kind's class as an index into ``tuple(FcClass)``, the order the credit stage's
# per-class arrays use (``sitssim.link.credit_link.FC_CLASSES``).
FC_CLASS_OF_KIND: tuple[int, ...] = tuple(tuple(FcClass).index(k.fc_class) for k in MESSAGE_KINDS)


def kind_code(name: str) -> int:
    """The code of the kind called ``name`` (``ValueError`` if there is none)."""
    return KIND_NAMES.index(name)


KIND_DATA = kind_code("data")
KIND_PROBE_REQUEST = kind_code("probe_request")
KIND_PROBE_COMPLETION = kind_code("probe_completion")
KIND_CLOCK_SYNC = kind_code("clock_sync")
KIND_FENCE = kind_code("fence")
KIND_COLLECTIVE = kind_code("collective")
KIND_TXN_WRITE = kind_code("txn_write")
KIND_TXN_READ = kind_code("txn_read")
KIND_TXN_COMPLETION = kind_code("txn_completion")
KIND_TENANT_REQUEST = kind_code("tenant_request")
KIND_TENANT_RESPONSE = kind_code("tenant_response")
KIND_LLDP = kind_code("lldp")
KIND_PEER_COPY = kind_code("peer_copy")
