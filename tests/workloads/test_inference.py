"""The inference driver: requests through an engine whose collectives cross the fabric.

Every figure checked here is read from the run's tables (collectives as they
completed in the fabric, messages as the transport delivered them, frames as
the stages put them on the wire), and compared with what the mechanism implies.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sitssim.ccl.endpoint import nccl_endpoint_costs
from sitssim.ccl.search import ring_search
from sitssim.ccl.tuning import NCCL_2_20
from sitssim.config.catalog import LLAMA3_8B
from sitssim.errors import InputError
from sitssim.preflight import preflight
from sitssim.protocol.token_frames import FIELD_RANGES, NS_PER_MS
from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate
from sitssim.workloads.collectives import chunk_sizes

TINY = {
    "name": "tiny",
    "n_layers": 4,
    "hidden": 256,
    "n_heads": 8,
    "n_kv_heads": 2,
    "head_dim": 32,
    "ffn_hidden": 512,
    "vocab": 1000,
}
NVSWITCH = {"kind": "nvswitch", "gpus": 8, "planes": 4, "links_per_gpu": 18, "link": "nvl"}
NVL = {"nvl": {"rate": "64GT/s", "lanes": 3, "encoding": "flit256", "length": "25cm"}}
FAT_TREE = {"kind": "fat_tree", "gpus": 4, "levels": 1, "radix": 4}


def scenario(workload: dict[str, Any], topology: dict | None = None, **top: Any) -> dict:
    data = {
        "name": "inference_test",
        "seed": 11,
        "duration": "1us",
        "topology": topology or FAT_TREE,
        "workloads": [{"kind": "inference", "name": "engine", **workload}],
        **top,
    }
    if topology is NVSWITCH:
        data["links"] = NVL
    return data


def requests(count: int = 1, prompt: int = 16, generated: int = 4, interval: str = "1ms") -> dict:
    return {
        "kind": "generator",
        "count": count,
        "prompt_tokens": prompt,
        "generated_tokens": generated,
        "interval": interval,
        "arrivals": "periodic",
    }


def run(data: dict) -> RunResult:
    return simulate(scenario_from_data(copy.deepcopy(data)))


def verdict(result: RunResult, clause: str) -> str:
    return next(v.verdict for v in result.verdicts if v.id == clause)


@pytest.fixture(scope="module")
def tp8() -> RunResult:
    """Llama-3-8B, TP=8 over an NVSwitch fabric, batch 1: the issue's acceptance set-up."""
    return run(
        scenario(
            {"gpus": 8, "gpu": "H100-SXM", "requests": requests(1, prompt=16, generated=3)},
            NVSWITCH,
        )
    )


# --- collectives in the fabric ---------------------------------------------------------


def test_tp8_decode_runs_two_all_reduces_of_one_token_per_layer_over_the_fabric(tp8):
    """64 all-reduces of 8 KiB per decode token: 2 per layer, T x hidden x 2 B, T = 1."""
    steps = tp8.tables["inference_steps"]
    decode = steps[steps["phase"] == "decode"]
    colls = tp8.tables["inference_collectives"]
    reduces = colls[colls["operation"] == "all_reduce"]
    per_step = reduces.groupby("step").size()
    expected_count = 2 * LLAMA3_8B.n_layers
    expected_bytes = 1 * LLAMA3_8B.hidden * 2
    assert (expected_count, expected_bytes) == (64, 8192)
    assert (per_step.reindex(decode["step"]) == expected_count).all()
    assert set(reduces.loc[reduces["step"].isin(decode["step"]), "bytes"]) == {expected_bytes}
    assert tp8.metrics["inference"]["engine"]["all_reduces_per_decode_token"] == expected_count

    # The ring's chunk sends, as the transport delivered them: 2(N-1) per rank, of S/N.
    messages = tp8.tables["messages"]
    n = 8
    chunk = chunk_sizes(expected_bytes, n)[0]
    for row in decode.itertuples():
        inside = messages[
            (messages["workload"] == 0)
            & (messages["t_inject_ns"] >= row.t_start_ns)
            & (messages["t_deliver_ns"] <= row.t_end_ns)
        ]
        assert (inside["bytes"] == chunk).sum() == expected_count * 2 * (n - 1) * n


def test_each_step_is_compute_then_waits_for_the_fabric(tp8):
    """No segment overlaps a collective: a step lasts its compute, its fabric waits and its
    waits for kernel launches."""
    steps = tp8.tables["inference_steps"]
    span = steps["t_end_ns"] - steps["t_start_ns"]
    parts = steps["compute_ns"] + steps["collective_ns"] + steps["transfer_ns"] + steps["launch_ns"]
    assert (steps["launch_ns"] > 0).all()
    np.testing.assert_allclose(span, parts, rtol=1e-9)
    colls = tp8.tables["inference_collectives"]
    for _, group in colls.groupby("step"):
        assert (group["t_start_ns"].to_numpy()[1:] >= group["t_end_ns"].to_numpy()[:-1]).all()


def test_tpot_is_reported_with_the_fabric_share(tp8):
    reqs = tp8.tables["requests"]
    steps = tp8.tables["inference_steps"]
    decode = steps[steps["phase"] == "decode"]
    share = decode["collective_ns"].sum() / (decode["t_end_ns"] - decode["t_start_ns"]).sum()
    metrics = tp8.metrics["inference"]["engine"]
    assert metrics["fabric_share_of_decode"] == pytest.approx(share)
    assert 0 < share < 1
    assert (reqs["fabric_share"] > 0).all() and (reqs["fabric_share"] < 1).all()
    tpot = (reqs["decode_ns"] / (reqs["tokens"] - 1)).to_numpy()
    np.testing.assert_allclose(reqs["tpot_ns"], tpot)


# --- kernel launches ------------------------------------------------------------------

# A decode step of TINY at TP = 2: per layer 5 + 5 kernels and 2 all-reduces, then the
# output head's 2 kernels and its all-gather.
TINY_STEP_KERNELS = TINY["n_layers"] * (5 + 1 + 5 + 1) + 2 + 1


def launched(mode: str, **costs: str) -> pd.DataFrame:
    """Decode steps of TINY at TP = 2, every step launched the same way."""
    launch = {"decode": mode, "prefill": mode, **costs}
    workload = {"gpus": 2, "model": TINY, "requests": requests(1, generated=4)}
    result = run(scenario({**workload, "engine": {"launch": launch}}))
    steps = result.tables["inference_steps"]
    return steps[steps["phase"] == "decode"].reset_index(drop=True)


def test_a_decode_graph_costs_its_launch_and_a_gap_before_each_of_its_kernels():
    """On an idle fabric a collective takes the same time whenever it starts, so a graph's
    step is the ideal step plus one graph launch and one GPU gap per kernel of the step."""
    ideal = launched("ideal")
    graph = launched("graph", graph="20us", gap="1us")
    assert (ideal["launch_ns"] == 0).all()
    extra = (graph["t_end_ns"] - graph["t_start_ns"]) - (ideal["t_end_ns"] - ideal["t_start_ns"])
    np.testing.assert_allclose(extra, 20_000 + TINY_STEP_KERNELS * 1_000, rtol=1e-9)
    np.testing.assert_allclose(graph["launch_ns"], extra, rtol=1e-9)
    np.testing.assert_allclose(graph["compute_ns"], ideal["compute_ns"], rtol=1e-12)


def test_eager_decode_waits_on_the_host_when_its_kernels_are_shorter_than_a_launch():
    """TINY's kernels and collectives take a few µs; launched at 50 µs each, the step takes
    the host's time: every kernel enqueued one after the other, then the last one run."""
    ideal = launched("ideal")
    eager = launched("eager", enqueue="50us", gap="0us")
    host = TINY_STEP_KERNELS * 50_000
    span = (eager["t_end_ns"] - eager["t_start_ns"]).to_numpy()
    assert (span > host).all()
    assert (span < host + (ideal["t_end_ns"] - ideal["t_start_ns"]).to_numpy()).all()
    assert (eager["launch_ns"] / span > 0.9).all()
    # With a fast host the same kernels are GPU-bound: the host only delays the first.
    fast = launched("eager", enqueue="1ns", gap="0us")
    span_ideal = (ideal["t_end_ns"] - ideal["t_start_ns"]).to_numpy()
    np.testing.assert_allclose(
        (fast["t_end_ns"] - fast["t_start_ns"]).to_numpy(), span_ideal + 1.0, rtol=1e-9
    )


def test_load_from_another_tenant_stretches_tpot_through_the_collectives():
    base = scenario(
        {"gpus": 4, "model": TINY, "requests": requests(1, generated=6)},
        tenants=[{"name": "infer"}, {"name": "other"}],
        duration="200us",
    )
    base["workloads"][0]["tenant"] = "infer"
    loaded = copy.deepcopy(base)
    loaded["workloads"].append(
        {
            "kind": "synthetic",
            "pattern": "uniform_random",
            "message_bytes": "16KiB",
            "load": 0.5,
            "tenant": "other",
        }
    )
    quiet, busy = run(base), run(loaded)
    q_steps, b_steps = (r.tables["inference_steps"] for r in (quiet, busy))
    np.testing.assert_allclose(q_steps["compute_ns"], b_steps["compute_ns"])
    assert b_steps["collective_ns"].sum() > 1.5 * q_steps["collective_ns"].sum()
    q_req, b_req = quiet.tables["requests"].iloc[0], busy.tables["requests"].iloc[0]
    assert b_req["tpot_ns"] > q_req["tpot_ns"]
    assert b_req["fabric_share"] > q_req["fabric_share"]


# --- pipeline stages and token frames ----------------------------------------------


PIPELINE = {
    "model": TINY,
    "stages": [["gpu0"], ["gpu1"], ["gpu2"]],
    "batch": 2,
    "requests": requests(3, generated=4, interval="1us"),
}


def test_frames_ride_through_every_stage_unchanged():
    result = run(scenario(PIPELINE))
    tokens = result.tables["tokens"]
    born = tokens[tokens["born"] & (tokens["to_stage"] == "emitter")]
    assert len(born) == 3 * 4
    hops = [("stage2", "stage0"), ("stage0", "stage1"), ("stage1", "stage2")]
    fed_back = tokens[tokens["born"] & (tokens["to_stage"] == "stage0")]
    # Every token but each request's last one is the input of a later step.
    assert len(fed_back) == 3 * (4 - 1)
    key = ["request", "token_id", "ts_logical"]
    reference = fed_back[key].sort_values(key).to_numpy()
    for sender, receiver in hops:
        hop = tokens[(tokens["stage"] == sender) & (tokens["to_stage"] == receiver)]
        np.testing.assert_array_equal(hop[key].sort_values(key).to_numpy(), reference)
        assert (hop["t_arrive_ns"] > hop["t_emit_ns"]).all()
    steps = result.tables["inference_steps"]
    assert (steps["transfer_ns"] > 0).all()
    assert verdict(result, "token.passthrough") == "pass"


@pytest.mark.parametrize(("stage", "culprit"), [(1, "stage1"), ("emitter", "emitter")])
def test_a_renumbering_stage_is_caught_where_it_renumbers(stage, culprit):
    data = scenario(PIPELINE)
    data["faults"] = [{"kind": "renumber_tokens", "stage": stage}]
    result = run(data)
    check = next(v for v in result.verdicts if v.id == "token.passthrough")
    assert check.verdict == "fail"
    assert f"{culprit}:" in check.detail and "renumbered" in check.detail
    tokens = result.tables["tokens"]
    clean = tokens[tokens["stage"] == "stage0"]
    assert clean["token_id"].isin(tokens.loc[tokens["born"], "token_id"]).all()


def test_latency_hint_is_the_measured_latency_of_each_token_in_ms():
    result = run(
        scenario({"gpus": 1, "gpu": "A100-80GB", "requests": requests(1, prompt=64, generated=5)})
    )
    tokens = result.tables["tokens"]
    born = tokens[tokens["born"]].sort_values("t_emit_ns")
    arrival = result.tables["requests"]["arrival_ns"].iloc[0]
    previous = np.concatenate([[arrival], born["t_emit_ns"].to_numpy()[:-1]])
    expected = np.round((born["t_emit_ns"].to_numpy() - previous) / NS_PER_MS)
    np.testing.assert_array_equal(born["latency_hint"], expected)
    assert (born["latency_hint"] > 0).all()
    emitted = tokens[tokens["stage"] == "emitter"].sort_values("t_emit_ns")
    gaps = np.diff(emitted["t_emit_ns"].to_numpy())
    assert (gaps >= (emitted["latency_hint"].to_numpy()[1:] + 5) * NS_PER_MS).all()


def test_a_hint_beyond_int16_is_recorded_as_produced_and_fails_the_frame_format():
    slow_gpu = {
        "name": "slow",
        "hbm_bytes_per_s": 1.0e11,
        "memory_bytes": 8.0e10,
        "bf16_flops_per_s": 1.0e12,
    }
    result = run(
        scenario({"gpus": 1, "gpu": slow_gpu, "requests": requests(1, prompt=2048, generated=2)})
    )
    tokens = result.tables["tokens"]
    hi = FIELD_RANGES["latency_hint"][1]
    over = tokens[tokens["latency_hint"] > hi]
    ttft_ms = result.tables["requests"]["ttft_ns"].iloc[0] / NS_PER_MS
    assert len(over) and (over["latency_hint"] == round(ttft_ms)).all()
    assert (over["wire"] == b"").all()
    check = next(v for v in result.verdicts if v.id == "token.frame_format")
    assert check.verdict == "fail" and check.measured == len(over)


@pytest.mark.parametrize(("mode", "extra"), [("naive", 1), ("strip", 0)])
def test_mhf_mode_sets_the_context_the_engine_computes_on(mode, extra):
    result = run(scenario({"gpus": 2, "model": TINY, "mhf": mode, "requests": requests(2)}))
    layouts = result.tables["mhf_layouts"]
    for column in ("kv_length", "attention_mask_length", "rope_offset"):
        assert (layouts[column] == layouts["real_tokens"] + extra).all()
    assert (layouts["buffer_bytes"] == 4 * (layouts["real_tokens"] + 1)).all()
    steps = result.tables["inference_steps"]
    assert (steps.loc[steps["phase"] == "prefill", "new_tokens"] == 16 + extra).all()
    first_decode = steps[steps["phase"] == "decode"].iloc[0]
    assert first_decode["context"] == 16 + extra + 1
    assert verdict(result, "token.mhf_kv_alignment") == ("fail" if extra else "pass")


def test_without_mhf_the_alignment_clause_has_nothing_to_judge():
    result = run(scenario({"gpus": 2, "model": TINY, "requests": requests(1)}))
    assert not result.tables["mhf_layouts"]["marked"].any()
    assert verdict(result, "token.mhf_kv_alignment") == "n/a"


# --- scheduling ---------------------------------------------------------------------


def _windows(result: RunResult) -> pd.DataFrame:
    reqs = result.tables["requests"].set_index("request")
    first = reqs["arrival_ns"] + reqs["ttft_ns"]
    return pd.DataFrame({"first": first, "last": first + reqs["decode_ns"]})


@pytest.mark.parametrize("batching", ["static", "continuous"])
def test_batching_policy_decides_when_requests_join(batching):
    wl = {
        "gpus": 2,
        "model": TINY,
        "batch": 2,
        "batching": batching,
        "requests": {
            "kind": "generator",
            "count": 3,
            "prompt_tokens": 16,
            "generated_tokens": {"dist": "uniform", "low": 6, "high": 12},
            "arrivals": "periodic",
            "interval": "2us",
        },
    }
    result = run(scenario(wl))
    windows = _windows(result)
    steps = result.tables["inference_steps"]
    prefills = steps[steps["phase"] == "prefill"]
    running_at_admission = [
        int(((windows["first"] < t) & (windows["last"] > t)).sum()) for t in prefills["t_start_ns"]
    ]
    if batching == "static":
        assert running_at_admission == [0] * len(prefills)
    else:
        assert max(running_at_admission) > 0
    assert (
        result.tables["requests"]["tokens"] == result.tables["requests"]["generated_tokens"]
    ).all()
    assert steps["batch"].max() <= 2


@pytest.mark.parametrize(("alpha", "per_step"), [(1.0, 4), (0.0, 1)])
def test_speculation_yields_the_accepted_tokens_per_step(alpha, per_step):
    gamma = 3
    draft = dict(TINY, name="draft", n_layers=2)
    wl = {
        "gpus": 2,
        "model": TINY,
        "requests": requests(1, generated=9),
        "engine": {"speculation": {"draft": draft, "gamma": gamma, "alpha": alpha}},
    }
    result = run(scenario(wl))
    steps = result.tables["inference_steps"]
    decode = steps[steps["phase"] == "decode"]
    assert decode["tokens_out"].iloc[:-1].eq(per_step).all()
    assert decode["tokens_out"].sum() == 9 - 1
    target, drafted = TINY["n_layers"], draft["n_layers"]
    assert (decode["all_reduces"] == 2 * (gamma * drafted + target)).all()


def test_skipped_layers_drop_their_all_reduces_and_their_compute():
    dense = {"gpus": 2, "model": TINY, "requests": requests(1, generated=12)}
    sparse = dict(
        dense,
        engine={
            "sparsity": {
                "head_threshold": 0.2,
                "layer_threshold": 0.5,
                "scores": {"kind": "beta", "a": 2.0, "b": 2.0},
            }
        },
    )
    d, s = run(scenario(dense)), run(scenario(sparse))
    d_dec, s_dec = (r.tables["inference_steps"] for r in (d, s))
    d_dec, s_dec = (x[x["phase"] == "decode"] for x in (d_dec, s_dec))
    assert (d_dec["all_reduces"] == 2 * TINY["n_layers"]).all()
    assert (s_dec["all_reduces"] % 2 == 0).all()
    assert s_dec["all_reduces"].sum() < d_dec["all_reduces"].sum()
    assert s_dec["compute_ns"].sum() < d_dec["compute_ns"].sum()
    heads = s.tables["engine_layers"]["heads_kept"]
    assert (heads < TINY["n_heads"]).all()
    assert (d.tables["engine_layers"]["heads_kept"] == TINY["n_heads"]).all()


def test_fp8_records_one_quantised_layer_each():
    wl = {
        "gpus": 2,
        "model": TINY,
        "requests": requests(1),
        "engine": {"fp8": {"activations": {"std": [0.5, 1.0, 2.0, 4.0], "values": 4096}}},
    }
    layers = run(scenario(wl)).tables["engine_layers"]
    assert layers["layer"].tolist() == list(range(TINY["n_layers"]))
    assert set(layers["format"]) == {"E4M3"}
    np.testing.assert_allclose(layers["std"], [0.5, 1.0, 2.0, 4.0], rtol=0.05)
    assert (layers["overflows"] == 0).all()
    assert ((layers["rel_error"] > 0) & (layers["rel_error"] < 0.1)).all()


def test_same_seed_same_tables_other_seed_other_tokens():
    data = scenario({"gpus": 2, "model": TINY, "requests": requests(2)})
    a, b = run(data), run(data)
    for name in ("tokens", "requests", "inference_steps", "inference_collectives"):
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name])
    other = simulate(scenario_from_data(copy.deepcopy(data)), seed=12)
    assert not np.array_equal(
        a.tables["tokens"]["token_id"].to_numpy(), other.tables["tokens"]["token_id"].to_numpy()
    )


def test_fp8_statistics_can_come_from_an_npz_beside_the_scenario(tmp_path):
    std = np.array([1.0, 2.0, 3.0, 4.0])
    np.savez(tmp_path / "acts.npz", std=std, nu=np.array([0.0, 0.0, 0.0, 2.2]))
    wl = {
        "gpus": 1,
        "model": TINY,
        "requests": requests(1, generated=2),
        "engine": {"fp8": {"activations": {"npz": "acts.npz", "values": 65536}}},
    }
    data = scenario(wl)
    result = simulate(scenario_from_data(data, path=str(tmp_path / "s.yaml")))
    layers = result.tables["engine_layers"]
    np.testing.assert_allclose(layers["std"].to_numpy()[:3], std[:3], rtol=0.05)
    # The Student-t layer (nu = 2.2) has the std of a Gaussian E4M3 handles, and heavier tails.
    assert (layers["format"] == "E4M3").all()
    assert layers["amax"].iloc[3] > 10 * layers["amax"].iloc[2]


def test_kv_compression_cuts_decode_work_at_long_context():
    base = {"gpus": 1, "model": TINY, "requests": requests(1, prompt=1500, generated=3)}
    compressed = dict(base, engine={"kv_compression": {"window": 128, "sample_tokens": 1024}})
    full, small = (
        run(scenario(wl)).tables["inference_steps"].query("phase == 'decode'")
        for wl in (base, compressed)
    )
    assert (small["compute_ns"].to_numpy() < full["compute_ns"].to_numpy()).all()


# --- collectives as NCCL runs them (collective: auto) ----------------------------------


def tp8_with(collective: str) -> dict[str, Any]:
    workload = {
        "gpus": 8,
        "gpu": "H100-SXM",
        "requests": requests(1, prompt=16, generated=3),
        "collective": collective,
    }
    return scenario(workload, NVSWITCH)


@pytest.fixture(scope="module")
def runs() -> dict[str, Any]:
    return {c: run(tp8_with(c)) for c in ("ring", "auto")}


def test_decode_all_reduces_record_nccl_s_choice(runs: dict[str, Any]) -> None:
    colls = runs["auto"].tables["inference_collectives"]
    steps = runs["auto"].tables["inference_steps"]
    decode = colls[colls["step"].isin(steps.loc[steps["phase"] == "decode", "step"])]
    reduces = decode[decode["operation"] == "all_reduce"]
    assert len(reduces) == 64 * 2
    # 8 KiB on 8 H100s: NCCL's cost model picks LL, and its launch rule one channel.
    chosen = reduces[["algorithm", "protocol", "channels"]].drop_duplicates()
    assert chosen.to_numpy().tolist() == [["ring", "ll", 1]]
    bare = runs["ring"].tables["inference_collectives"]
    assert set(bare["protocol"]) == {"none"}
    assert set(bare["channels"]) == {0}


def test_a_decode_all_reduce_costs_its_kernel_and_every_step(runs: dict[str, Any]) -> None:
    costs = nccl_endpoint_costs(
        NCCL_2_20, "ring", "ll", "all_reduce", ring_search(18, "hopper"), "hopper", 1
    )
    floor_ns = costs.kernel_ns + 2 * (8 - 1) * costs.step_ns
    for name, at_least, at_most in (("auto", floor_ns, 2 * floor_ns), ("ring", 0, floor_ns / 10)):
        colls = runs[name].tables["inference_collectives"]
        small = colls[colls["bytes"] == 8192]
        duration = small["t_end_ns"] - small["t_start_ns"]
        assert (duration >= at_least).all() and (duration <= at_most).all(), name


@pytest.mark.parametrize("collective", ["ring", "auto", "custom"])
def test_the_estimate_counts_the_messages_each_kind_of_all_reduce_sends(
    runs: dict[str, Any], collective: str
) -> None:
    # NCCL's calls send a message per piece, lane and step on every channel they take, far
    # more than a bare ring's one per chunk and step, and the output head all-gathers its
    # logits every step; the prefill yields the first token. One request, no batching: the
    # estimate is the run's count.
    data = tp8_with(collective)
    if collective == "custom":
        # A 40-token prompt's 320 KiB all-reduces take the two-shot kernel: at 16 tokens the
        # custom run happens to send as many messages as NCCL's would.
        data = tp8_custom("5us")
        data["workloads"][0]["requests"]["prompt_tokens"] = 40
    estimated = preflight(scenario_from_data(copy.deepcopy(data))).estimate.messages
    result = run(data) if collective == "custom" else runs[collective]
    produced = len(result.tables["messages"])
    assert estimated == pytest.approx(produced, rel=0.01)


def test_the_fabric_share_of_tpot_grows_with_the_endpoint_costs(runs: dict[str, Any]) -> None:
    def share(result: Any) -> float:
        steps = result.tables["inference_steps"]
        decode = steps[steps["phase"] == "decode"]
        return decode["collective_ns"].sum() / (decode["t_end_ns"] - decode["t_start_ns"]).sum()

    assert share(runs["auto"]) > 3 * share(runs["ring"])


def test_auto_needs_an_nvswitch_node_and_a_gpu_nccl_tunes_for() -> None:
    on_tree = scenario({"gpus": 4, "requests": requests(), "collective": "auto"}, FAT_TREE)
    with pytest.raises(InputError, match=r"collective.*NVSwitch node"):
        simulate(scenario_from_data(on_tree))
    custom = tp8_with("auto")
    custom["workloads"][0]["gpu"] = {
        "name": "x",
        "bf16_flops_per_s": 1e15,
        "hbm_bytes_per_s": 3e12,
        "memory_bytes": 8e10,
        "compute_capability": 9.0,
    }
    with pytest.raises(InputError, match=r"collective.*built-in GPU"):
        scenario_from_data(custom)


def tp8_custom(kernel: str) -> dict[str, Any]:
    data = tp8_with("custom")
    data["workloads"][0]["custom"] = {"kernel": kernel, "load_bandwidth": "73GB/s"}
    return data


def test_a_serving_engine_s_kernel_runs_the_decode_all_reduces_and_nccl_the_rest() -> None:
    result = run(tp8_custom("5us"))
    colls = result.tables["inference_collectives"]
    steps = result.tables["inference_steps"]
    decode = colls[colls["step"].isin(steps.loc[steps["phase"] == "decode", "step"])]
    reduces = decode[decode["operation"] == "all_reduce"]
    # 8 KiB on 8 GPUs: vLLM's one-shot kernel; the logits' all-gather goes to NCCL.
    assert set(reduces["algorithm"]) == {"custom_one_shot"}
    assert set(reduces["protocol"]) == {"custom"}
    gathers = colls[colls["operation"] == "all_gather"]
    assert len(gathers) and set(gathers["protocol"]) <= {"ll", "ll128", "simple"}
    # Each one-shot call is its fixed cost, two barriers and a read: above the cost, and
    # well below NCCL's LL ring of the same size.
    duration = reduces["t_end_ns"] - reduces["t_start_ns"]
    assert (duration > 5000.0).all() and (duration < 8000.0).all()


def test_the_custom_kernel_s_fixed_cost_is_paid_by_every_decode_all_reduce() -> None:
    tpot = {}
    for kernel in ("4us", "6us"):
        result = run(tp8_custom(kernel))
        tpot[kernel] = result.metrics["inference"]["engine"]["decode_time_per_token_ns"]
    # 64 all-reduces per token, each 2 us dearer: 128 us more per output token.
    assert tpot["6us"] - tpot["4us"] == pytest.approx(128_000.0, rel=0.02)


def test_custom_needs_its_costs_and_only_with_it() -> None:
    data = tp8_with("custom")
    with pytest.raises(InputError, match=r"custom.*'collective: custom'"):
        scenario_from_data(data)
    data = tp8_with("auto")
    data["workloads"][0]["custom"] = {"kernel": "5us", "load_bandwidth": "73GB/s"}
    with pytest.raises(InputError, match=r"custom.*'collective: custom'"):
        scenario_from_data(data)
