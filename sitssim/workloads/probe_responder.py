"""The completer side of round-trip probes: a delivered probe request is answered.

A probe request that is delivered turns into a completion after the completer's
turnaround, sent back to the requester with the request as its parent; the pair's
round trip is then measured from the request's injection to the completion's
delivery (the ``probes`` table). Each probe workload sets its own turnaround and
completion size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from sitssim.errors import InvariantViolation
from sitssim.fabric.messages import KIND_PROBE_COMPLETION, KIND_PROBE_REQUEST

if TYPE_CHECKING:
    import simpy

    from sitssim.fabric.transport import Transport


@dataclass
class ProbeResponder:
    """Answers every probe request delivered on ``transport``; ``params[workload]`` is that
    probe workload's (turnaround ns, completion bytes)."""

    transport: Transport
    params: dict[int, tuple[float, int]]
    pending: int = field(default=0, init=False)

    def attach(self) -> None:
        self.transport.on_delivery(KIND_PROBE_REQUEST, self._answer)

    def _answer(self, request: int) -> None:
        self.pending += 1
        turnaround, completion_bytes = self.params[self.transport.workload[request]]
        self.transport.env.timeout(turnaround).callbacks.append(
            partial(self._complete, request, completion_bytes)
        )

    def _complete(self, request: int, completion_bytes: int, _ev: simpy.Event) -> None:
        self.pending -= 1
        t = self.transport
        t.inject(
            t.dst[request],
            t.src[request],
            completion_bytes,
            t.tenant[request],
            KIND_PROBE_COMPLETION,
            t.workload[request],
            parent=request,
        )

    def check_idle(self) -> None:
        """Every answer was sent: the run cannot end with a completion still due."""
        if self.pending:
            raise InvariantViolation(f"{self.pending} probe completions were never sent")
