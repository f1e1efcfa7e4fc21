"""waves.vcd carries the link layer's replays and credit stalls beside the PHY signals."""

from __future__ import annotations

from pathlib import Path

from sitssim.results.vcd import write_vcd
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate


def test_replays_and_credit_stalls_appear_per_channel(tmp_path: Path) -> None:
    result = simulate(
        scenario_from_data(
            {
                "name": "vcd",
                "seed": 4,
                "duration": "10us",
                "topology": {"kind": "fat_tree", "gpus": 4, "levels": 1, "radix": 4},
                "link_layer": {
                    "flit": {"pre_fec_ber": 1e-4},
                    "credits": {"header_credits": 2, "data_credits": 256},
                },
                "workloads": [
                    {
                        "kind": "synthetic",
                        "pattern": "hotspot",
                        "message_bytes": "2KiB",
                        "load": 0.6,
                        "hotspot_fraction": 0.7,
                    }
                ],
            }
        )
    )
    assert len(result.tables["replays"]) and len(result.tables["credits"])
    path = tmp_path / "waves.vcd"
    start = result.metrics["phy"]["traffic_start_ns"]
    assert write_vcd(result.tables, path, start)
    text = path.read_text()
    assert "$var integer 32" in text and "replays" in text
    assert "credit_stall" in text
    for name in set(result.tables["credits"]["link"]) | set(result.tables["replays"]["link"]):
        assert name.replace(">", "_to_").replace(".", "_") in text
