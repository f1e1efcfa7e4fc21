"""What waits for what in a stalled run: the observed wait-for graph of full buffers.

Read from the models' own state at one instant (a watchdog's snapshot), for
:func:`sitssim.switch.deadlock.wait_for_cycle`. A buffer is ``(channel, vc)``, the one
behind a channel for one VC (``sitssim.switch.deadlock.Buffer``). Three things wait:

* an input-queued switch's VC head short of credit at its output: its buffer, behind
  the channel it came over, waits for the buffer behind the output's channel, on the
  head's VC (``InputQueuedSwitch.blocked_heads``);
* a message in a credited port's queue that came over another port (a forwarded one at
  an output-queued switch or root complex): its place behind that port waits for the
  port's far buffer;
* a request waiting at an answering endpoint for a place in its answer queue
  (``fabric.nodes.AnsweringEndpoint``): its place behind the port it came over waits for
  a place to free, and the places that cannot free now are those of answers queued at the
  endpoint's credited ports for credit (``fabric.nodes.AnswerSlot``), so it waits for each
  of their far buffers. (Answers still being made free their places by themselves.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sitssim.fabric.nodes import AnsweringEndpoint, AnswerSlot
from sitssim.fabric.ports import CreditedPort, OutputPort
from sitssim.switch.input_queued import InputQueuedSwitch

if TYPE_CHECKING:
    from sitssim.fabric.transport import Transport
    from sitssim.switch.deadlock import Buffer


def wait_for_edges(transport: Transport) -> list[tuple[Buffer, Buffer]]:
    """Every (waiting buffer, buffer it waits for) in ``transport`` now, sorted."""
    vc = transport.vc
    edges: set[tuple[Buffer, Buffer]] = set()
    for node in transport.node_objects:
        if isinstance(node, InputQueuedSwitch):
            for in_port, head_vc, msg, out in node.blocked_heads():
                edges.add(((in_port.channel, head_vc), (out.channel, vc[msg])))
    # The buffers that answers queued at each answering endpoint's ports wait for.
    answers: dict[int, set[Buffer]] = {}
    for port in transport.ports:
        if not isinstance(port, CreditedPort):
            continue
        for msg, came_over in port.waiting():
            want: Buffer = (port.channel, vc[msg])
            if isinstance(came_over, AnswerSlot):
                answers.setdefault(came_over.endpoint.index, set()).add(want)
            elif isinstance(came_over, OutputPort):
                edges.add(((came_over.channel, vc[msg]), want))
    for node in transport.node_objects:
        if isinstance(node, AnsweringEndpoint):
            for msg, in_port in node.waiting():
                for want in answers.get(node.index, ()):
                    edges.add(((in_port.channel, vc[msg]), want))
    return sorted(edges)
