"""switch.vc_quota input: a table beyond the spec is valid (it runs and fails the clause);
a table that means nothing is bad input, one located line, exit 2, no output folder.

Each snippet marks the line the message must name with a trailing ``# <-``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from located_errors import assert_located
from typer.testing import CliRunner

from sitssim.cli import app

HEAD = """\
version: 1
name: quota
duration: 2us
topology: {kind: nvswitch, gpus: 2, planes: 2, links_per_gpu: 2}
tenants: [{name: A}, {name: B}]
workloads:
  - {kind: synthetic, tenant: B, pattern: uniform_random, message_bytes: 256B, load: 0.1}
"""


def quota(body: str, faults: str = "", head: str = HEAD) -> str:
    return head + "switch:\n  vc_quota:\n" + body + faults


def run(tmp_path: Path, text: str) -> tuple[int, str, Path]:
    path = tmp_path / "quota.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out), "--no-figures"])
    return result.exit_code, result.stderr, path


CASES = [
    pytest.param(
        quota("    table: {A: [16, -1]}  # <-\n"),
        "switch.vc_quota.table.A[1]",
        "a value of 0 or more",
        id="negative-slots",
    ),
    pytest.param(
        quota("    table: {A: [1.5]}  # <-\n"),
        "switch.vc_quota.table.A[0]",
        "a whole number",
        id="fractional-slots",
    ),
    pytest.param(
        quota("    table: {A: [true]}  # <-\n"),
        "switch.vc_quota.table.A[0]",
        "a whole number",
        id="bool-slots",
    ),
    pytest.param(
        quota("    table: {A: [65536]}  # <-\n"),
        "switch.vc_quota.table.A[0]",
        "at most 65535",
        id="slot-counter-overflow",
    ),
    pytest.param(
        quota("    table:\n      A: [" + ", ".join(["1"] * 257) + "]  # <-\n"),
        "switch.vc_quota.table.A",
        "at most 256",
        id="insane-vc-count",
    ),
    pytest.param(
        quota("    table: {}  # <-\n"),
        "switch.vc_quota.table",
        "at least 1",
        id="empty-table",
    ),
    pytest.param(
        quota("    table:\n      A: [8]\n      C: [8]  # <-\n"),
        "switch.vc_quota.table.C",
        "unknown tenant 'C'",
        id="unknown-tenant",
    ),
    pytest.param(
        quota(
            "    table: {A: [8]}\n"
            "    ports:\n"
            "      - switch: nvs0\n"
            "        table: {A: [4], D: [4]}  # <-\n"
        ),
        "switch.vc_quota.ports[0].table.D",
        "unknown tenant 'D'",
        id="unknown-tenant-in-override",
    ),
    pytest.param(
        quota("    table: {A: [8]}\n    ports:\n      - {switch: gpu0, table: {A: [4]}}  # <-\n"),
        "switch.vc_quota.ports[0].switch",
        "'gpu0' is not a switch",
        id="override-on-a-gpu",
    ),
    pytest.param(
        quota(
            "    table: {A: [8]}\n"
            "    ports:\n"
            "      - {switch: nvs0, peer: gpu0, table: {A: [4]}}\n"
            "      - {switch: nvs0, peer: gpu0, table: {A: [2]}}  # <-\n"
        ),
        "switch.vc_quota.ports[1]",
        "a second table for nvs0>gpu0",
        id="two-tables-for-one-port",
    ),
    pytest.param(
        quota(
            "    table: {A: [8]}\n"
            "    updates:\n"
            "      - {at: 1us, switch: nvs0, peer: nvs1, tenant: A, slots: [1]}  # <-\n"
        ),
        "switch.vc_quota.updates[0].peer",
        "'nvs1' is not linked to 'nvs0'",
        id="write-to-no-such-port",
    ),
    pytest.param(
        quota(
            "    table: {A: [8]}\n"
            "    updates:\n"
            "      - {at: 1us, switch: nvs0, tenant: Z, slots: [1]}  # <-\n"
        ),
        "switch.vc_quota.updates[0].tenant",
        "unknown tenant 'Z'",
        id="write-for-an-unknown-tenant",
    ),
    pytest.param(
        quota(
            "    table: {A: [8]}\n"
            "    updates:\n"
            "      - {at: 2us, switch: nvs0, tenant: A, slots: [1]}  # <-\n"
        ),
        "switch.vc_quota.updates[0].at",
        "'at' must come before the end of the run",
        id="write-after-the-run",
    ),
    pytest.param(
        quota(
            "    table: {A: [8]}\n",
            "faults:\n  - {kind: quota_runtime_update, switch: gpu1}  # <-\n",
        ),
        "faults[0].switch",
        "'gpu1' is not a switch",
        id="fault-on-a-gpu",
    ),
    pytest.param(
        quota(
            "    table: {A: [8]}\n",
            "faults:\n"
            "  - {kind: quota_runtime_update, switch: nvs0}\n"
            "  - {kind: quota_runtime_update, switch: nvs0}  # <-\n",
        ),
        "faults[1].switch",
        "a second 'quota_runtime_update' fault on 'nvs0'",
        id="two-faults-on-one-switch",
    ),
    pytest.param(
        HEAD + "faults:\n  - {kind: quota_runtime_update, switch: nvs0}  # <-\n",
        "faults[0].kind",
        "needs switch.vc_quota",
        id="fault-without-a-table",
    ),
    pytest.param(
        quota(
            "    table: {A: [8]}\n",
            head=HEAD.replace(
                "{kind: nvswitch, gpus: 2, planes: 2, links_per_gpu: 2}",
                "{kind: direct_rc, gpus: 2}",
            ),
        ).replace("  vc_quota:\n", "  vc_quota:  # <-\n"),
        "switch.vc_quota",
        "the fabric has no switch",
        id="no-switch-ports",
    ),
]


@pytest.mark.parametrize(("text", "field", "expected"), CASES)
def test_a_meaningless_quota_is_one_located_line_and_exit_2(
    tmp_path: Path, text: str, field: str, expected: str
) -> None:
    assert_located(tmp_path, text, field, expected)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            "    table: {A: [16, 16, 16, 16, 0, 0, 0, 0], B: [12, 12, 12, 12, 12]}\n", id="124"
        ),
        pytest.param("    table: {A: [1, 1, 1, 1, 1, 1, 1, 1, 1]}\n", id="9-vcs"),
        pytest.param("    table: {A: [8, 8, 8, 8, 8, 8, 8, 8]}\n", id="64"),
    ],
)
def test_a_table_beyond_the_spec_is_valid_input_that_runs(tmp_path: Path, body: str) -> None:
    code, stderr, _ = run(tmp_path, quota(body))
    within = "[8, 8, 8, 8, 8, 8, 8, 8]" in body
    # Exit 1: a clause failed; the run wrote its results.
    assert code == (0 if within else 1), stderr
    assert (tmp_path / "out" / "vc_quota_ports.parquet").exists()
