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

# table -> (GPUs in the run, how nccl-tests was launched), as its header says: one process
# driving them all ("-g N") or one process per GPU ("ranks")
VPBENCHMARKING = "nccl_tests_h100_8gpu_vpbenchmarking.csv"
TABLES = {
    "nccl_tests_a100_8gpu_oci.csv": (8, "-g"),
    "nccl_tests_a100_8gpu_thanos_g8.csv": (8, "-g"),
    "nccl_tests_a100_8gpu_dkh.csv": (8, "-g"),
    "nccl_tests_a100_8gpu_thanos_mpirun.csv": (8, "ranks"),
    "nccl_tests_a100_8gpu_azureml.csv": (8, "ranks"),
    "nccl_tests_a100_8gpu_gcm.csv": (8, "ranks"),
    "nccl_tests_h100_4gpu_lambda.csv": (4, "-g"),
    "nccl_tests_h100_4gpu_waynehacking8.csv": (4, "-g"),
    "nccl_tests_h100_2gpu_digitalocean.csv": (2, "-g"),
    "nccl_tests_h100_allreduce.csv": (8, "-g"),
    VPBENCHMARKING: (8, "-g"),
    "nccl_tests_h100_8gpu_dgxc.csv": (8, "ranks"),
    "nccl_tests_h100_8gpu_aws_p5.csv": (8, "ranks"),
}


def _read(name: str) -> pd.DataFrame:
    """A table with nccl-tests' out-of-place columns, whichever layout it was copied in."""
    t = pd.read_csv(DATA / name, comment="#")
    return t.rename(
        columns={
            "bytes": "size_bytes",
            "oop_time_us": "time_us",
            "oop_algbw_GBps": "algbw_GBps",
            "oop_busbw_GBps": "busbw_GBps",
        }
    )


def test_every_table_in_the_folder_is_checked() -> None:
    assert sorted(p.name for p in DATA.glob("nccl_tests_*.csv")) == sorted(TABLES)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_row_has_the_bandwidths_its_time_gives(name: str) -> None:
    t = _read(name)
    n, _ = TABLES[name]
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
    n, launch = TABLES[name]
    if launch == "-g":
        assert f"nGpus {n}" in header or f"-g {n}" in header
    else:
        assert f"{n} ranks" in header
