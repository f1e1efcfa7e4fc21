"""The measured nccl-tests tables in notebooks/data/ are self-consistent as transcribed.

nccl-tests prints time, algbw = bytes / time and busbw = algbw * 2 (n - 1) / n for an
all-reduce, each rounded. A row mistyped while copying breaks one of those relations; so
does a header that names the wrong GPU count, through the bus factor.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

DATA = Path(__file__).resolve().parents[1] / "notebooks" / "data"

# table -> GPUs in the run, as its header says
VPBENCHMARKING = "nccl_tests_h100_8gpu_vpbenchmarking.csv"
TABLES = {
    "nccl_tests_a100_8gpu_oci.csv": 8,
    "nccl_tests_h100_4gpu_lambda.csv": 4,
    "nccl_tests_h100_2gpu_digitalocean.csv": 2,
    "nccl_tests_h100_allreduce.csv": 8,
    VPBENCHMARKING: 8,
}


def _read(name: str) -> pd.DataFrame:
    t = pd.read_csv(DATA / name, comment="#")
    if name == VPBENCHMARKING:
        t = t.rename(
            columns={
                "bytes": "size_bytes",
                "oop_time_us": "time_us",
                "oop_algbw_GBps": "algbw_GBps",
                "oop_busbw_GBps": "busbw_GBps",
            }
        )
    return t


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_row_has_the_bandwidths_its_time_gives(name: str) -> None:
    t = _read(name)
    n = TABLES[name]
    algbw = t["size_bytes"] / (t["time_us"] * 1e3)
    # Printed to two decimals from times printed to four significant digits.
    assert ((algbw - t["algbw_GBps"]).abs() <= 0.006 + 0.0006 * algbw).all()
    busbw = algbw * 2 * (n - 1) / n
    assert ((busbw - t["busbw_GBps"]).abs() <= 0.006 + 0.0006 * busbw).all()


@pytest.mark.parametrize("name", sorted(TABLES))
def test_sizes_double_and_count_floats(name: str) -> None:
    t = _read(name)
    assert (t["size_bytes"] == 4 * t["count"]).all()
    assert (t["size_bytes"].iloc[1:].to_numpy() == 2 * t["size_bytes"].iloc[:-1].to_numpy()).all()


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_header_names_source_gpus_nccl_and_command(name: str) -> None:
    header = "\n".join(
        line for line in (DATA / name).read_text().splitlines() if line.startswith("#")
    )
    assert "Source" in header
    assert "H100" in header or "A100" in header
    assert "NCCL" in header
    assert f"nGpus {TABLES[name]}" in header or f"-g {TABLES[name]}" in header
