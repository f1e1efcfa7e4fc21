"""Line encodings and the payload fraction of the raw bit rate they leave.

``flit256`` is PCIe 6.x flit mode, whose efficiency follows from the flit
layout in ``sitssim.link.flit`` (TLP bytes over flit bytes). The block codes
are the classic PCIe 1-5 encodings. ``none`` is an idealised link.
"""

from __future__ import annotations

from sitssim.link import flit

_EFFICIENCY = {
    "flit256": flit.payload_efficiency(),
    "128b130b": 128 / 130,
    "8b10b": 8 / 10,
    "none": 1.0,
}


def payload_efficiency(encoding: str) -> float:
    """Fraction of the raw bit rate that carries transaction payload."""
    return _EFFICIENCY[encoding]
