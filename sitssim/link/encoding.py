"""Line encodings and the payload fraction of the raw bit rate they leave.

``flit256`` is PCIe 6.x flit mode: each 256-byte flit carries 236 bytes of
TLP; the rest is data-link payload, CRC and FEC. The block codes are the
classic PCIe 1-5 encodings. ``none`` is an idealised link (no overhead).
"""

from __future__ import annotations

FLIT_BYTES = 256
FLIT_TLP_BYTES = 236

_EFFICIENCY = {
    "flit256": FLIT_TLP_BYTES / FLIT_BYTES,
    "128b130b": 128 / 130,
    "8b10b": 8 / 10,
    "none": 1.0,
}


def payload_efficiency(encoding: str) -> float:
    """Fraction of the raw bit rate that carries transaction payload."""
    return _EFFICIENCY[encoding]
