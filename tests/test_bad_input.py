"""Bad input: one message naming file, line and field; exit 2; no traceback; no output.

Every snippet marks the line the message must name with a trailing ``# <-``, so
the expected line is read from the snippet rather than counted by hand. Each
case is run through ``sitssim run --out DIR``, the strictest path: the folder
must not exist afterwards.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from sitssim.cli import app

runner = CliRunner()
MARK = "# <-"

HEAD = "version: 1\nname: bad\nduration: 2us\n"
FAT_TREE = "topology:\n  kind: fat_tree\n  gpus: 4\n  levels: 1\n  radix: 4\n"
LINKS = "links:\n  default:\n    rate: 64GT/s\n    lanes: 16\n"
TRAFFIC = (
    "workloads:\n"
    "  - kind: synthetic\n"
    "    pattern: uniform_random\n"
    "    message_bytes: 256B\n"
    "    load: 0.1\n"
)
GRAPH = """\
topology:
  kind: graph
  nodes:
    - {id: g0, kind: gpu}
    - {id: g1, kind: gpu}
    - {id: s0, kind: switch}
  edges:
    - {a: g0, b: s0}
    - {a: g1, b: s0}
"""


def scenario(
    head: str = HEAD, topology: str = FAT_TREE, links: str = LINKS, workloads: str = TRAFFIC
) -> str:
    """The good base scenario with one section swapped for a broken one."""
    return head + topology + links + workloads


def workload(body: str) -> str:
    return "workloads:\n" + body


def marked_line(text: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.rstrip().endswith(MARK):
            return number
    return None


def invoke(*args: object) -> Result:
    return runner.invoke(app, [str(a) for a in args])


def assert_rejected(
    result: Result, out: Path | None, file: str, line: int | None, field: str | None
) -> str:
    """Exit 2, one ``error:`` line naming ``file:line: field:``, no traceback, no ``out``."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    messages = result.stderr.strip().splitlines()
    assert len(messages) == 1, result.stderr
    where = file + (f":{line}" if line is not None else "") + ":"
    where += f" {field}:" if field is not None else ""
    assert messages[0].startswith(f"error: {where} "), (messages[0], where)
    if out is not None:
        assert not out.exists()
    return messages[0]


def run_bad(tmp_path: Path, text: str, field: str | None, expects: tuple[str, ...]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    message = assert_rejected(
        invoke("run", path, "--out", out), out, str(path), marked_line(text), field
    )
    for expected in expects:
        assert expected in message, (expected, message)


def case(text: str, field: str | None, *expects: str, id: str) -> object:
    assert MARK in text, f"case {id} marks no line"
    return pytest.param(text, field, expects, id=id)


CASES = [
    # --- not a scenario mapping
    case("name: t\n  bad: value  # <-\n", None, "not valid YAML", id="not-yaml"),
    case(
        "name: t\ntopology: {kind: fat_tree\nduration: 1us  # <-\n",
        None,
        "not valid YAML",
        id="not-yaml-unclosed-flow",
    ),
    case(
        "- name: t  # <-\n- duration: 1us\n", None, "expected a mapping", "a YAML list", id="list"
    ),
    case("just some words  # <-\n", None, "expected a mapping", "a YAML scalar", id="scalar"),
    case(HEAD + "name: again  # <-\n" + FAT_TREE, None, "duplicate key", id="duplicate-key"),
    case(scenario(head=HEAD + "<<: {seed: 1}  # <-\n"), None, "merge keys", id="merge-key"),
    # --- fields that do not belong to the workload's pattern, or cannot take effect
    case(
        scenario(workloads=TRAFFIC + "    hotspot: gpu1  # <-\n"),
        "workloads[0].hotspot",
        "belongs to pattern 'hotspot'",
        id="hotspot-without-pattern",
    ),
    case(
        scenario(workloads=TRAFFIC + "    start: 5us  # <-\n"),
        "workloads[0].start",
        "must come before 'duration'",
        id="start-after-duration",
    ),
    case(
        scenario(
            workloads=TRAFFIC
            + "    name: a\n"
            + TRAFFIC[len("workloads:\n") :]
            + "    name: a  # <-\n"
        ),
        "workloads[1].name",
        "used twice",
        id="duplicate-workload-name",
    ),
    # --- unknown keys, with the closest valid key suggested at every level
    case(scenario(head=HEAD + "seeed: 3  # <-\n"), "seeed", "did you mean 'seed'", id="key-top"),
    case(
        scenario(topology=FAT_TREE + "  radx: 4  # <-\n"),
        "topology.radx",
        "did you mean 'radix'",
        id="key-topology",
    ),
    case(
        scenario(links=LINKS + "    lanse: 8  # <-\n"),
        "links.default.lanse",
        "did you mean 'lanes'",
        id="key-link-profile",
    ),
    case(
        scenario(workloads=TRAFFIC + "    tenat: default  # <-\n"),
        "workloads[0].tenat",
        "did you mean 'tenant'",
        id="key-workload",
    ),
    case(
        scenario(workloads=workload("  - kind: probes\n    requestr: gpu0  # <-\n")),
        "workloads[0].requestr",
        "did you mean 'requester'",
        id="key-probes",
    ),
    case(
        scenario(head=HEAD + "switch:\n  vcs_per_prot: 8  # <-\n"),
        "switch.vcs_per_prot",
        "did you mean 'vcs_per_port'",
        id="key-switch",
    ),
    # --- wrong types
    case(
        scenario(topology=FAT_TREE.replace("gpus: 4", "gpus: eight  # <-")),
        "topology.gpus",
        "expected a whole number",
        "'eight'",
        id="type-gpus",
    ),
    case(
        scenario(links=LINKS.replace("lanes: 16", "lanes: 1.5  # <-")),
        "links.default.lanes",
        "expected a whole number",
        "1.5",
        id="type-lanes",
    ),
    case(
        scenario(workloads=TRAFFIC.replace("load: 0.1", "load: lots  # <-")),
        "workloads[0].load",
        "expected a number",
        id="type-load",
    ),
    case(
        scenario(links="links: [fast, slow]  # <-\n"),
        "links",
        "expected a mapping",
        id="type-links-list",
    ),
    case(
        scenario(links=LINKS + "    encoding: 9b11b  # <-\n"),
        "links.default.encoding",
        "expected one of",
        "'flit256'",
        id="type-encoding",
    ),
    # --- non-positive quantities
    case(
        scenario(links=LINKS.replace("rate: 64GT/s", "rate: 0GT/s  # <-")),
        "links.default.rate",
        "expected a positive signalling rate",
        id="zero-rate",
    ),
    case(
        scenario(links=LINKS.replace("rate: 64GT/s", "rate: -64GT/s  # <-")),
        "links.default.rate",
        "expected a positive signalling rate",
        id="negative-rate",
    ),
    case(
        scenario(links=LINKS.replace("lanes: 16", "lanes: 0  # <-")),
        "links.default.lanes",
        "expected a positive value",
        id="zero-lanes",
    ),
    case(
        scenario(workloads=TRAFFIC.replace("256B", "0B  # <-")),
        "workloads[0].message_bytes",
        "expected a positive size",
        id="zero-size",
    ),
    case(
        scenario(head=HEAD.replace("duration: 2us", "duration: -2us  # <-")),
        "duration",
        "expected a positive time",
        id="negative-duration",
    ),
    case(
        scenario(head=HEAD.replace("duration: 2us", "duration: 0ns  # <-")),
        "duration",
        "expected a positive time",
        id="zero-duration",
    ),
    # --- units
    case(
        scenario(head=HEAD.replace("duration: 2us", "duration: 200 furlongs  # <-")),
        "duration",
        "unknown unit 'furlongs'",
        "ns",
        id="unit-unknown",
    ),
    case(
        scenario(head=HEAD.replace("duration: 2us", "duration: 4KiB  # <-")),
        "duration",
        "'KiB' is a size unit",
        "expected a time",
        id="unit-size-for-time",
    ),
    case(
        scenario(workloads=TRAFFIC.replace("256B", "4us  # <-")),
        "workloads[0].message_bytes",
        "'us' is a time unit",
        "expected a size",
        id="unit-time-for-size",
    ),
    case(
        scenario(head=HEAD.replace("duration: 2us", "duration: 200  # <-")),
        "duration",
        "expected a time with a unit",
        id="bare-duration",
    ),
    case(
        scenario(workloads=TRAFFIC.replace("256B", "4096  # <-")),
        "workloads[0].message_bytes",
        "expected a size with a unit",
        id="bare-size",
    ),
    case(
        scenario(links=LINKS.replace("rate: 64GT/s", "rate: 64  # <-")),
        "links.default.rate",
        "expected a signalling rate with a unit",
        id="bare-rate",
    ),
    case(
        scenario(head=HEAD + "switch:\n  arbitration:\n    - 40ns\n    - 35  # <-\n"),
        "switch.arbitration[1]",
        "expected a time with a unit",
        id="bare-time-in-list",
    ),
    # --- topologies that contradict themselves
    case(
        scenario(topology=FAT_TREE.replace("gpus: 4", "gpus: 5  # <-")),
        "topology.gpus",
        "do not fit",
        id="fat-tree-overfull-1-level",
    ),
    case(
        scenario(
            topology=FAT_TREE.replace("gpus: 4", "gpus: 17  # <-").replace("levels: 1", "levels: 2")
        ),
        "topology.gpus",
        "do not fit",
        id="fat-tree-overfull-2-level",
    ),
    case(
        scenario(topology=GRAPH + "    - {a: g1, b: s9}  # <-\n"),
        "topology.edges[2].b",
        "undeclared node 's9'",
        id="edge-undeclared",
    ),
    case(
        scenario(
            topology=GRAPH.replace("{id: g1, kind: gpu}", "{id: g1, kind: gpu}  # <-")
        ).replace("    - {a: g1, b: s0}\n", ""),
        "topology.nodes[1]",
        "'g1' has no link",
        id="gpu-without-link",
    ),
    case(
        scenario(topology="topology:\n  kind: torus  # <-\n  gpus: 4\n"),
        "topology.kind",
        "unknown kind 'torus'",
        "fat_tree",
        id="kind-topology",
    ),
    case(
        scenario(workloads=workload("  - kind: magic  # <-\n")),
        "workloads[0].kind",
        "unknown kind 'magic'",
        "synthetic",
        id="kind-workload",
    ),
    case(
        scenario(head=HEAD.replace("version: 1", "version: 2  # <-")),
        "version",
        "schema version",
        id="version-2",
    ),
    # --- references
    case(
        scenario(workloads=TRAFFIC + "    tenant: bob  # <-\n"),
        "workloads[0].tenant",
        "unknown tenant 'bob'",
        id="unknown-tenant",
    ),
    case(
        scenario(topology=FAT_TREE + "  link: fast  # <-\n"),
        "topology.link",
        "unknown link profile 'fast'",
        id="unknown-link-profile",
    ),
    case(
        scenario(topology=GRAPH.replace("{a: g0, b: s0}", "{a: g0, b: s0, link: slow}  # <-")),
        "topology.edges[0].link",
        "unknown link profile 'slow'",
        id="unknown-edge-profile",
    ),
    # --- input past the loader's bounds, and numbers no model can hold
    case(
        scenario(head=HEAD + "description: " + "[" * 300 + "]" * 300 + "  # <-\n"),
        None,
        "nested more than 64",
        "bound: 64",
        id="bound-nesting",
    ),
    case(
        scenario(
            head=HEAD
            + "description: &l ["
            + ", ".join(["lol"] * 200)
            + "]\nseed: ["
            + ", ".join(["*l"] * 1000)
            + "]  # <-\n"
        ),
        None,
        "expands to more than",
        "bound:",
        id="bound-alias-expansion",
    ),
    case(
        scenario(head=HEAD + "description: &d [1, *d]  # <-\n"),
        None,
        "recursive data",
        id="recursive-alias",
    ),
    case(
        scenario(head=HEAD + "seed: &s 1\ndescription: &s two  # <-\n"),
        None,
        "anchor '&s' is defined twice",
        id="reused-anchor",
    ),
    case(
        scenario(head=HEAD + "description: " + "a" * 5000 + "  # <-\n"),
        None,
        "5000 characters",
        "bound: 4096",
        id="bound-scalar-length",
    ),
    case(
        scenario(head=HEAD + "seed: " + "9" * 5000 + "  # <-\n"),
        None,
        "bound: 4096",
        id="bound-5000-digit-integer",
    ),
    case(
        scenario(head=HEAD + "seed: " + "9" * 1000 + "  # <-\n"),
        None,
        "a number of 1000 characters",
        id="bound-number-length",
    ),
    case(
        scenario(head=HEAD + "description: !!omap [{a: 1}]  # <-\n"),
        None,
        "'!!omap' is not allowed",
        id="tag-omap",
    ),
    case(
        scenario(head=HEAD + "description: !!set {a, b}  # <-\n"),
        None,
        "'!!set' is not allowed",
        id="tag-set",
    ),
    case(
        scenario() + "---  # <-\nname: second\n",
        None,
        "a second YAML document",
        id="two-documents",
    ),
    case(
        "%YAML 1.1\n---  # <-\n" + scenario(),
        None,
        "YAML 1.1 is not read",
        id="yaml-1.1",
    ),
    case(
        scenario(head=HEAD + "description: a\x00b  # <-\n"),
        None,
        "special characters",
        "'\\x00'",
        id="control-character",
    ),
    case(
        scenario(head=HEAD + "description: " + "v" * 3000 + "\nname: twice  # <-\n"),
        None,
        'duplicate key "name"',
        id="duplicate-key-long-value",
    ),
    case(
        scenario(head=HEAD.replace("duration: 2us", "duration: 1e999999us  # <-")),
        "duration",
        "exponent within",
        id="quantity-overflow",
    ),
    case(
        scenario(head=HEAD.replace("duration: 2us", "duration: ٥us  # <-")),
        "duration",
        "expected a time like",
        id="quantity-non-ascii-digit",
    ),
    case(
        scenario(head=HEAD.replace("duration: 2us", "duration: 9" + "0" * 80 + "us  # <-")),
        "duration",
        "(83 chars)",
        id="quantity-long-number",
    ),
    case(
        scenario(topology=FAT_TREE.replace("gpus: 4", "gpus: " + "eight" * 500 + "  # <-")),
        "topology.gpus",
        "expected a whole number",
        "(2500 chars)",
        id="type-long-text-clipped",
    ),
    case(
        scenario(workloads=TRAFFIC.replace("load: 0.1", "load: .inf  # <-")),
        "workloads[0].load",
        "got inf",
        id="float-inf",
    ),
    case(
        scenario(workloads=TRAFFIC.replace("load: 0.1", "load: .nan  # <-")),
        "workloads[0].load",
        "got nan",
        id="float-nan",
    ),
    case(
        scenario(links=LINKS.replace("lanes: 16", "lanes: 0x" + "f" * 90 + "  # <-")),
        "links.default.lanes",
        "an integer of about 108 digits",
        id="huge-integer-clipped",
    ),
    case(
        scenario(head=HEAD + "description: 2001-13-45  # <-\n"),
        None,
        "does not read as !!timestamp",
        id="impossible-date",
    ),
]

# Node references are checked once the fabric exists; still exit 2, still a line.
PAIR = "  - kind: synthetic\n    pattern: pair\n    message_bytes: 256B\n    interval: 1us\n"
HOTSPOT = "  - kind: synthetic\n    pattern: hotspot\n    message_bytes: 256B\n    load: 0.1\n"
NODE_CASES = [
    case(
        scenario(workloads=workload(PAIR + "    src: gpu7  # <-\n    dst: gpu1\n")),
        "workloads[0].src",
        "unknown node 'gpu7'",
        id="src",
    ),
    case(
        scenario(workloads=workload(PAIR + "    src: gpu0\n    dst: nowhere  # <-\n")),
        "workloads[0].dst",
        "unknown node 'nowhere'",
        id="dst",
    ),
    case(
        scenario(workloads=TRAFFIC + "    sources:\n      - gpu0\n      - gpu9  # <-\n"),
        "workloads[0].sources[1]",
        "unknown node 'gpu9'",
        id="sources",
    ),
    case(
        scenario(workloads=workload(HOTSPOT + "    hotspot: gpu4  # <-\n")),
        "workloads[0].hotspot",
        "unknown node 'gpu4'",
        id="hotspot",
    ),
    case(
        scenario(workloads=workload("  - kind: probes\n    requester: rc7  # <-\n")),
        "workloads[0].requester",
        "unknown node 'rc7'",
        id="requester",
    ),
    case(
        scenario(workloads=workload("  - kind: probes\n    targets: [gpu1, gpu8]  # <-\n")),
        "workloads[0].targets[1]",
        "unknown node 'gpu8'",
        id="targets",
    ),
]


@pytest.mark.parametrize(("text", "field", "expects"), CASES)
def test_bad_scenario_is_one_located_message(
    tmp_path: Path, text: str, field: str | None, expects: tuple[str, ...]
) -> None:
    run_bad(tmp_path, text, field, expects)


@pytest.mark.parametrize(("text", "field", "expects"), NODE_CASES)
def test_workload_naming_an_unknown_node(
    tmp_path: Path, text: str, field: str | None, expects: tuple[str, ...]
) -> None:
    run_bad(tmp_path, text, field, expects)


@pytest.mark.parametrize(
    "tag",
    [
        '!!python/object/apply:os.system ["touch @CANARY@"]',
        "!!python/name:os.system",
        '!!python/object/new:subprocess.Popen [["touch", "@CANARY@"]]',
        "!include other.yaml",
    ],
    ids=["object-apply", "name", "object-new", "custom"],
)
def test_object_constructing_tags_are_refused_before_anything_runs(
    tmp_path: Path, tag: str
) -> None:
    canary = tmp_path / "canary"
    line = f"description: {tag.replace('@CANARY@', str(canary))}  {MARK}\n"
    run_bad(tmp_path, scenario(head=HEAD + line), None, ("not allowed",))
    assert not canary.exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"   \n\n", b"# a comment and nothing else\n"],
    ids=["zero-bytes", "whitespace", "comment-only"],
)
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.yaml"
    path.write_bytes(content)
    out = tmp_path / "out"
    message = assert_rejected(invoke("run", path, "--out", out), out, str(path), None, None)
    assert "empty file" in message and "expected a YAML mapping" in message


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    out = tmp_path / "out"
    message = assert_rejected(invoke("run", path, "--out", out), out, str(path), None, None)
    assert "no such scenario file" in message


def test_file_that_is_not_text(tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"name: \xff\xfe\x00\x81\n")
    out = tmp_path / "out"
    message = assert_rejected(invoke("run", path, "--out", out), out, str(path), 1, None)
    assert "not UTF-8" in message


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.yaml"
    path.write_text(scenario(), encoding="utf-8")
    return path


def test_out_folder_under_a_regular_file(tmp_path: Path, good: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    out = blocker / "out"
    result = invoke("run", good, "--out", out)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    message = result.stderr.strip()
    assert "\n" not in message
    assert "--out" in message and str(blocker) in message and "not a directory" in message
    assert blocker.read_text() == "not a folder"


def test_out_folder_that_is_a_regular_file(tmp_path: Path, good: Path) -> None:
    out = tmp_path / "taken"
    out.write_text("precious")
    result = invoke("run", good, "--out", out)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    message = result.stderr.strip()
    assert "--out" in message and out.name in message and "not a directory" in message
    assert out.read_text() == "precious"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "Usage"),
        (("run",), "Missing argument"),
        (("validate",), "Missing argument"),
        (("run", "@GOOD@", "--out", "@OUT@", "--bogus"), "--bogus"),
        (("run", "@GOOD@", "--out", "@OUT@", "--seed", "-1"), "--seed"),
        (("run", "@GOOD@", "--out", "@OUT@", "--seed", "many"), "--seed"),
        (("simulate-everything",), "No such command"),
    ],
    ids=[
        "no-argument",
        "run-no-scenario",
        "validate-no-scenario",
        "unknown-option",
        "negative-seed",
        "non-integer-seed",
        "unknown-command",
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path, good: Path, args: tuple[str, ...], expected: str
) -> None:
    out = tmp_path / "out"
    filled = [{"@GOOD@": str(good), "@OUT@": str(out)}.get(a, a) for a in args]
    result = invoke(*filled)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert expected in result.output
    assert not out.exists()


def test_validate_accepts_the_good_scenario(good: Path) -> None:
    result = invoke("validate", good)
    assert result.exit_code == 0, result.output
    assert f"{good}: valid" in result.stdout
    assert result.stderr == ""


def test_validate_rejects_a_bad_one_as_run_does(tmp_path: Path) -> None:
    text = scenario(workloads=workload(PAIR + "    src: gpu0\n    dst: gpu5  # <-\n"))
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    message = assert_rejected(
        invoke("validate", path), None, str(path), marked_line(text), "workloads[0].dst"
    )
    assert "unknown node 'gpu5'" in message
    assert list(tmp_path.iterdir()) == [path]


def test_a_real_process_exits_2_with_the_message_on_stderr(tmp_path: Path) -> None:
    text = scenario(links=LINKS.replace("lanes: 16", "lanes: 1.5  # <-"))
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    command = "from sitssim.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", command, "run", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(
        f"error: {path}:{marked_line(text)}: links.default.lanes: expected a whole number"
    )
    assert not out.exists()
