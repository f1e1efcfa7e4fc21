"""The SimPy driver of ``kind: inference`` workloads: LLM requests through the fabric.

Theory of operation
-------------------
A workload is one engine: ``S`` pipeline stages of ``N`` tensor-parallel GPUs
each (``S = 1`` without ``stages``). A scheduler runs one *step* at a time:
the prefill of newly admitted requests, or one decode step of every running
request (static batching admits a new batch only when the last one is done;
continuous batching admits arrivals into free slots before each step, as
iteration-level schedulers do). A step's passes come from
`sitssim.workloads.engine` (prefill; decode or draft + verify when speculating)
and are walked layer by layer, stage by stage:

* a compute segment (attention or MLP block, the output head) holds the stage's
  GPUs for the engine's roofline time;
* each of a layer's two tensor-parallel all-reduces runs as a real collective
  over the fabric (`sitssim.workloads.collectives`), and the next segment starts
  only when the fabric has finished it, so queueing, other tenants and slow
  links show in TTFT and TPOT;
* between stages, rank *i* of stage *s* sends the activations (T·hidden·2 B,
  split into messages of at most ``max_message``) to rank *i* of stage *s + 1*;
  rank 0's messages also carry the step's token frames (14 B each).

Everything is a callback on the shared SimPy environment: a timeout per run of
compute segments, the collective's completion callback, message-delivery
callbacks. No process per message or per request.

Token frames. The sampler (on the last stage) creates one frame per generated
token: ``token_id`` the sampled id, ``ts_logical`` from the sampler's logical
clock, ``latency_hint`` the pipeline's measured latency of that token in ms
(time since the request's previous token, or since its arrival for the first),
rounded. The frame goes to the emitter, which paces it with a `Pacer` per
request and sends it to the client; and, if the request goes on, it is the
input of the next decode step, so it travels from the sampler to stage 0 and
on through every stage with the activations. Each hop is one row of the
``tokens`` table, recorded as the sender put it on the wire (its 14-byte
encoding, or no bytes when the codec refuses a field, e.g. a hint beyond
int16: the value is recorded as produced, never clamped). Stages and the
emitter forward frames unchanged, unless a ``renumber_tokens`` fault makes one
rewrite a field; ``pacing_ignores_hint`` gives the emitter a pacer that keeps
the 5 ms base window whatever the hint.

MHF: at admission the client's prompt buffer (random token ids, prefixed with
the 4-byte marker when ``mhf`` is not ``off``) is read by the consumer with
`mhf.derive_layout`; the KV length it derives is the context the engine then
computes on, so the naive reading's extra token shows in the work done.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import simpy

from sitssim.ccl.custom_ar import custom_algorithm
from sitssim.config.catalog import ModelConfig
from sitssim.config.collective_config import ALL_REDUCE_ONLY, OPERATIONS, CollectiveWorkload
from sitssim.config.inference_config import (
    InferenceWorkload,
    PacingIgnoresHintFault,
    RenumberTokensFault,
    TraceRequests,
)
from sitssim.config.switch_capabilities import SwitchCapabilities
from sitssim.errors import InputError, Locator
from sitssim.fabric.messages import KIND_DATA
from sitssim.fabric.routing import Router
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.protocol.token_frames import (
    FRAME_SIZE_BYTES,
    NS_PER_MS,
    FrameRangeError,
    LogicalClock,
    Pacer,
    TokenFrame,
    encode,
)
from sitssim.rng import component_rng
from sitssim.summaries import sample_summary
from sitssim.workloads.ccl_calls import NcclCalls
from sitssim.workloads.ccl_choice import not_an_nccl_fabric
from sitssim.workloads.ccl_nvls import CclNvls
from sitssim.workloads.ccl_ring import CclRing
from sitssim.workloads.collective_workloads import BARE_PROTOCOL
from sitssim.workloads.collectives import start_collective
from sitssim.workloads.custom_allreduce import CustomAllReduce, custom_run
from sitssim.workloads.engine import (
    Efficiency,
    EngineConfig,
    EngineModel,
    ForwardPass,
    HeadScoreDistribution,
    KvCompressionConfig,
    SparsityPlan,
    Speculation,
    compress_kv,
    plan_sparsity,
    synthetic_keys,
)
from sitssim.workloads.fp8 import (
    ActivationSpec,
    Fp8LayerRecord,
    Fp8Policy,
    load_activation_specs,
    quantise_layers,
    synthesise_activations,
)
from sitssim.workloads.gpu_names import require_gpu
from sitssim.workloads.kernel_launch import LAUNCHES, KernelStream, LaunchCosts
from sitssim.workloads.mhf import derive_layout, prepend_marker
from sitssim.workloads.section import WorkloadSection
from sitssim.workloads.traces import RequestSet, synthetic_requests, trace_requests

EMITTER = "emitter"
CLIENT = "client"
ACTIVATION_BYTES = 2


def collective_runner(collective: str, operation: str, n_ranks: int, size: int) -> str:
    """What runs one tensor-parallel ``operation`` of ``size`` bytes over ``n_ranks`` GPUs
    under the workload's ``collective``: ``custom``, the serving engine's kernel, for the
    all-reduces it takes; ``auto``, NCCL's call, for everything else under ``auto`` or
    ``custom``; otherwise the bare algorithm, a ring where that algorithm only all-reduces."""
    if collective == "custom":
        takes = operation == "all_reduce" and custom_algorithm(n_ranks, size) is not None
        return "custom" if takes else "auto"
    if operation != "all_reduce" and collective in ALL_REDUCE_ONLY:
        return "ring"
    return collective


def stage_name(stage: int) -> str:
    return f"stage{stage}"


def split_layers(n_layers: int, stages: int) -> list[range]:
    """Contiguous layer ranges, earlier stages taking one more when it does not divide."""
    base, extra = divmod(n_layers, stages)
    out, start = [], 0
    for s in range(stages):
        stop = start + base + (1 if s < extra else 0)
        out.append(range(start, stop))
        start = stop
    return out


@dataclass
class _Request:
    rid: int
    arrival_ns: float
    prompt: int
    target: int
    kv: int = 0
    produced: int = 0
    t_first: float = math.nan
    t_last: float = math.nan
    prev_ns: float = 0.0
    inputs: list[TokenFrame] = field(default_factory=list)
    fabric_ns: float = 0.0
    pacer: Pacer = field(default_factory=Pacer)
    t_client_last: float = math.nan


@dataclass
class _Op:
    """One step of a pass: compute on a stage, an all-reduce in it, or a send to the next."""

    kind: str
    stage: int
    duration_ns: float = 0.0
    name: str = ""
    layer: int = -1
    size: int = 0
    kernels: int = 1


class _TableRows:
    """Column lists for one table; rows are appended field by field."""

    def __init__(self, *columns: str) -> None:
        self.columns: dict[str, list[Any]] = {c: [] for c in columns}

    def add(self, **row: Any) -> None:
        for key, values in self.columns.items():
            values.append(row[key])

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))


def _wire(frame: TokenFrame) -> bytes:
    try:
        return encode(frame)
    except FrameRangeError:
        return b""


class InferenceDriver:
    """One ``kind: inference`` workload on a transport's environment."""

    def __init__(
        self,
        section: InferenceSection,
        where: Locator,
        fabric: Fabric,
        transport: Transport,
        index: int,
        wl: InferenceWorkload,
        faults: list[tuple[int, RenumberTokensFault | PacingIgnoresHintFault]],
        first_request_id: int = 0,
    ) -> None:
        self.base_dir = section.base_dir
        self.where = where
        self.at = where.within("workloads", index)
        self.transport = transport
        self.env = transport.env
        self.index = index
        self.wl = wl
        label = wl.name or f"#{index}"
        self.rng = component_rng(section.workloads.seed, "inference", label)
        self.tenant = section.workloads.tenant_index(wl.tenant)
        self.stages = self._stage_gpus(fabric)
        refusal = not_an_nccl_fabric(fabric) if wl.collective in ("auto", "custom") else ""
        if refusal:
            raise self._error(("collective",), f"{refusal}: use a bare algorithm")
        self.fabric = fabric
        self.switches = section.switches
        self._nccl: dict[tuple[int, str], NcclCalls] = {}
        self.model: ModelConfig = wl.resolved_model()
        self.tp = len(self.stages[0])
        self.engine = self._engine()
        spec = self.engine.config.speculation
        self.draft_engine = (
            EngineModel(
                replace(self.engine.config, model=spec.draft, speculation=None, kv_compression=None)
            )
            if spec is not None
            else None
        )
        self.layer_ranges = split_layers(self.model.n_layers, len(self.stages))
        launch = wl.engine.launch
        self.launch_costs = LaunchCosts.from_options(launch)
        self.launches = {"prefill": LAUNCHES[launch.prefill], "decode": LAUNCHES[launch.decode]}
        self.vocab = self.model.vocab

        requests = self._requests()
        self.requests = [
            _Request(
                first_request_id + i,
                float(requests.arrival_ns[i]),
                int(requests.prompt_tokens[i]),
                int(requests.generated_tokens[i]),
            )
            for i in range(len(requests))
        ]
        self.sparsity = self._sparsity()
        self.fp8_records = self._fp8()

        self.renumber: dict[str, RenumberTokensFault] = {}
        honour_hint = True
        for k, fault in faults:
            if isinstance(fault, RenumberTokensFault):
                self.renumber[self._fault_stage(k, fault)] = fault
            else:
                honour_hint = False
        for req in self.requests:
            req.pacer = Pacer(honour_hint=honour_hint)
        self._forwarded = dict.fromkeys(self.renumber, 0)
        self.clock = LogicalClock()

        self._waiting: deque[_Request] = deque()
        self._running: list[_Request] = []
        self._next_arrival = 0
        self._busy = False
        self._step = 0
        self._passes: dict[tuple, tuple[ForwardPass, ...]] = {}
        self._head_sum = np.zeros(self.model.n_layers)
        self._head_weight = np.zeros(self.model.n_layers)
        self.end_ns = 0.0

        self.token_rows = _TableRows(
            "workload",
            "request",
            "token_id",
            "ts_logical",
            "latency_hint",
            "stage",
            "to_stage",
            "born",
            "t_emit_ns",
            "t_arrive_ns",
            "wire",
        )
        self.layout_rows = _TableRows(
            "workload",
            "request",
            "mode",
            "marked",
            "real_tokens",
            "buffer_bytes",
            "kv_length",
            "attention_mask_length",
            "rope_offset",
        )
        self.step_rows = _TableRows(
            "workload",
            "step",
            "phase",
            "batch",
            "new_tokens",
            "context",
            "tokens_out",
            "t_start_ns",
            "t_end_ns",
            "compute_ns",
            "collective_ns",
            "transfer_ns",
            "launch_ns",
            "all_reduces",
            "all_reduce_bytes",
        )
        self.collective_rows = _TableRows(
            "workload",
            "step",
            "stage",
            "operation",
            "algorithm",
            "protocol",
            "channels",
            "layer",
            "after",
            "bytes",
            "gpus",
            "t_start_ns",
            "t_end_ns",
        )
        self.span_rows = _TableRows(
            "workload", "step", "stage", "kind", "name", "t_start_ns", "t_end_ns"
        )

    def custom_call(self, gpus: list[str], size: int) -> CustomAllReduce | None:
        """The serving engine's custom all-reduce of ``size`` bytes (``collective: custom``),
        for a call ``collective_runner`` gives it; None past its buffer."""
        custom = self.wl.custom
        assert custom is not None
        return custom_run(
            self.transport, gpus, size, custom, self.tenant, self.index, None, self.wl.max_message
        )

    def nccl_calls(self, stage: int, operation: str) -> NcclCalls:
        """NCCL's calls of ``operation`` over ``stage``'s GPUs (``collective: auto``)."""
        key = (stage, operation)
        if key not in self._nccl:
            wl = CollectiveWorkload(
                kind="collective",
                operation=operation,
                algorithm="auto",
                gpu=str(self.wl.gpu),
                nccl=self.wl.nccl,
                sizes=["1B"],
                max_message_bytes=f"{self.wl.max_message}B",
            )
            self._nccl[key] = NcclCalls(
                wl,
                self.fabric,
                self.transport,
                self.stages[stage],
                self.switches,
                self.tenant,
                self.index,
            )
        return self._nccl[key]

    # --- set-up ---------------------------------------------------------------

    def _error(self, loc: tuple, message: str) -> InputError:
        return self.at.error(loc, message)

    def _gpu(self, fabric: Fabric, loc: tuple, name: str) -> str:
        require_gpu(self.at, fabric, loc, name)
        return name

    def _stage_gpus(self, fabric: Fabric) -> list[list[str]]:
        wl = self.wl
        if wl.stages is not None:
            return [
                [self._gpu(fabric, ("stages", s, k), g) for k, g in enumerate(stage)]
                for s, stage in enumerate(wl.stages)
            ]
        if isinstance(wl.gpus, list):
            return [[self._gpu(fabric, ("gpus", k), g) for k, g in enumerate(wl.gpus)]]
        count = len(fabric.gpus) if wl.gpus is None else wl.gpus
        if count > len(fabric.gpus):
            raise self._error(("gpus",), f"{count} GPUs asked, the fabric has {len(fabric.gpus)}")
        return [list(fabric.gpus[:count])]

    def _engine(self) -> EngineModel:
        opts = self.wl.engine
        kv = None
        if opts.kv_compression is not None:
            c = opts.kv_compression
            keys = synthetic_keys(
                c.sample_tokens, self.model.head_dim, self.rng, n_kv_heads=self.model.n_kv_heads
            )
            kv = compress_kv(
                keys, KvCompressionConfig(c.sink_tokens, c.window, c.similarity_threshold)
            )
        spec = None
        if opts.speculation is not None:
            s = opts.speculation
            spec = Speculation(s.resolved_draft(), s.gamma, s.alpha)
        try:
            config = EngineConfig(
                model=self.model,
                gpu=self.wl.resolved_gpu(),
                tp=self.tp,
                weight_format=opts.weight_format,
                embedding_format=opts.embedding_format,
                kv_format=opts.kv_format,
                efficiency=Efficiency(opts.efficiency.flops, opts.efficiency.bandwidth),
                materialise_scores=opts.materialise_scores,
                kv_compression=kv,
                speculation=spec,
            )
        except ValueError as exc:
            where = ("gpus",) if self.wl.stages is None else ("stages",)
            raise self._error(where, str(exc)) from None
        return EngineModel(config)

    def _requests(self) -> RequestSet:
        cfg = self.wl.requests
        if isinstance(cfg, TraceRequests):
            try:
                return trace_requests(cfg, self.base_dir)
            except ValueError as exc:
                raise self._error(("requests", "path"), str(exc)) from None
        return synthetic_requests(cfg, self.rng)

    def _sparsity(self) -> SparsityPlan | None:
        opts = self.wl.engine.sparsity
        if opts is None:
            return None
        gamma = self.wl.engine.speculation.gamma if self.wl.engine.speculation else 0
        positions = max(r.prompt + 1 + r.target + gamma for r in self.requests) + 1
        scores = opts.scores
        try:
            dist = HeadScoreDistribution(
                scores.kind,
                tuple(scores.a) if isinstance(scores.a, list) else scores.a,
                tuple(scores.b) if isinstance(scores.b, list) else scores.b,
            )
            drawn = dist.draw(positions, self.model.n_layers, self.model.n_heads, self.rng)
        except ValueError as exc:
            raise self._error(("engine", "sparsity", "scores"), str(exc)) from None
        return plan_sparsity(drawn, opts.head_threshold, opts.layer_threshold)

    def _fp8(self) -> tuple[Fp8LayerRecord, ...]:
        opts = self.wl.engine.fp8
        if opts is None:
            return ()
        act = opts.activations
        loc = ("engine", "fp8", "activations")
        n_layers = self.model.n_layers
        if act.npz is not None:
            path = self.base_dir / act.npz
            try:
                specs = load_activation_specs(path)
            except (OSError, ValueError) as exc:
                raise self._error((*loc, "npz"), str(exc)) from None
            if len(specs) != n_layers:
                raise self._error(
                    (*loc, "npz"), f"{len(specs)} layers of statistics for {n_layers} layers"
                )
        else:
            per_layer = {}
            for key in ("std", "nu"):
                value = getattr(act, key)
                values = value if isinstance(value, list) else [value] * n_layers
                if len(values) != n_layers:
                    raise self._error(
                        (*loc, key), f"{len(values)} values for {n_layers} layers (give 1 or all)"
                    )
                per_layer[key] = values
            pairs = zip(per_layer["std"], per_layer["nu"], strict=True)
            specs = tuple(ActivationSpec(std, nu) for std, nu in pairs)
        outputs = synthesise_activations(specs, act.values, self.rng)
        return quantise_layers(outputs, Fp8Policy(opts.k_sigma, opts.scale))

    def _fault_stage(self, k: int, fault: RenumberTokensFault) -> str:
        if fault.stage == EMITTER:
            return EMITTER
        last = len(self.stages) - 1
        if fault.stage >= last:
            forwarders = f"0..{last - 1} or 'emitter'" if last else "'emitter'"
            raise self.where.error(
                ("faults", k, "stage"),
                f"stage {fault.stage} does not forward frames: the last stage ({last}) holds "
                f"the sampler that creates them; choose {forwarders}",
            )
        return stage_name(fault.stage)

    def horizon_ns(self) -> float:
        """A rough end of the work from compute times alone, unbatched (for progress reports)."""
        if not self.requests:
            return 0.0
        prompt = round(float(np.mean([r.prompt for r in self.requests])))
        later = float(np.mean([r.target for r in self.requests])) - 1.0
        per_request = (
            self.engine.prefill(1, prompt).time_s
            + self.engine.decode_step(1, prompt).time_s * later
        )
        return self.requests[-1].arrival_ns + len(self.requests) * per_request * 1e9

    # --- arrivals and scheduling -------------------------------------------------

    def start(self) -> None:
        if self.requests:
            self._at(self.requests[0].arrival_ns, self._arrive)

    def _at(self, t_ns: float, fn: Callable[[], None]) -> None:
        self.env.timeout(max(t_ns - self.env.now, 0.0)).callbacks.append(lambda _ev: fn())

    def _arrive(self) -> None:
        now = self.env.now
        reqs = self.requests
        while self._next_arrival < len(reqs) and reqs[self._next_arrival].arrival_ns <= now:
            self._waiting.append(reqs[self._next_arrival])
            self._next_arrival += 1
        if self._next_arrival < len(reqs):
            self._at(reqs[self._next_arrival].arrival_ns, self._arrive)
        self._schedule()

    def _schedule(self) -> None:
        if self._busy:
            return
        free = self.wl.batch - len(self._running)
        admit_now = self.wl.batching == "continuous" or not self._running
        if self._waiting and free > 0 and admit_now:
            admitted = [self._waiting.popleft() for _ in range(min(free, len(self._waiting)))]
            self._prefill(admitted)
        elif self._running:
            self._decode()

    # --- steps --------------------------------------------------------------------

    def _cached(
        self, key: tuple, build: Callable[[], tuple[ForwardPass, ...]]
    ) -> tuple[ForwardPass, ...]:
        passes = self._passes.get(key)
        if passes is None:
            passes = build()
            self._passes[key] = passes
        return passes

    def _prefill(self, admitted: list[_Request]) -> None:
        mode = self.wl.mhf
        for req in admitted:
            ids = self.rng.integers(self.vocab, size=req.prompt, dtype=np.int64)
            buffer = prepend_marker(ids) if mode != "off" else ids.astype("<u4").tobytes()
            layout = derive_layout(buffer, "naive" if mode == "naive" else "strip")
            req.kv = layout.kv_length
            req.prev_ns = req.arrival_ns
            self.layout_rows.add(
                workload=self.index,
                request=req.rid,
                mode=mode,
                marked=mode != "off",
                real_tokens=req.prompt,
                buffer_bytes=len(buffer),
                kv_length=layout.kv_length,
                attention_mask_length=layout.attention_mask_length,
                rope_offset=layout.rope_offset,
            )
        batch = len(admitted)
        tokens = max(req.kv for req in admitted)
        passes = [
            self._cached(
                ("prefill", batch, tokens),
                lambda: (self.engine.prefill(batch, tokens, self.sparsity),),
            )[0]
        ]
        if self.draft_engine is not None:
            draft = self.draft_engine
            passes += self._cached(
                ("draft_prefill", batch, tokens), lambda: (draft.prefill(batch, tokens),)
            )
        self._running.extend(admitted)
        self._run_step("prefill", passes, passes[0], admitted, tokens, 0, inputs=False)

    def _decode(self) -> None:
        running = self._running
        batch = len(running)
        if self.wl.batching == "static":
            context = max(req.kv for req in running)
        else:
            context = round(sum(req.kv for req in running) / batch)
        passes = self._cached(
            ("decode", batch, context),
            lambda: self.engine.decode_step(batch, context, self.sparsity).passes,
        )
        # The draft's passes (when speculating) come first, the target's verify pass last.
        self._run_step("decode", list(passes), passes[-1], list(running), 1, context, inputs=True)

    def _run_step(
        self,
        phase: str,
        passes: list[ForwardPass],
        target: ForwardPass,
        members: list[_Request],
        new_tokens: int,
        context: int,
        inputs: bool,
    ) -> None:
        """Walk ``passes`` in order; ``target`` is the target model's (the rest are the draft's)."""
        self._busy = True
        ops: list[_Op] = []
        last = len(self.stages) - 1
        if inputs and last > 0:
            ops.append(_Op("feedback", last))
        for fp in passes:
            ops.extend(self._pass_ops(fp, fp is target))
        self._count_heads(target)
        run = _StepRun(self, self._step, phase, ops, members, new_tokens, context, inputs)
        self._step += 1
        run.advance()

    def _pass_ops(self, fp: ForwardPass, target: bool) -> list[_Op]:
        ranges = self.layer_ranges if target else [range(len(fp.layers))]
        ar = {(c.layer, c.after): c.bytes for c in fp.collectives if c.kind == "all_reduce"}
        ops: list[_Op] = []
        for s, layers in enumerate(ranges):
            for layer in layers:
                lp = fp.layers[layer]
                if lp.skipped:
                    continue
                for seg in (lp.attention, lp.mlp):
                    if seg.time_s > 0:
                        ops.append(
                            _Op(
                                "compute", s, seg.time_s * 1e9, seg.name, layer, kernels=seg.kernels
                            )
                        )
                    size = ar.get((layer, seg.name))
                    if size:
                        ops.append(_Op("all_reduce", s, name=seg.name, layer=layer, size=size))
            if s < len(ranges) - 1:
                size = fp.batch * fp.new_tokens * self.model.hidden * ACTIVATION_BYTES
                ops.append(_Op("send", s, size=size))
        head = fp.lm_head
        ops.append(
            _Op("compute", len(ranges) - 1, head.time_s * 1e9, head.name, kernels=head.kernels)
        )
        for c in fp.collectives:
            if c.kind == "all_gather":
                ops.append(_Op("all_gather", len(ranges) - 1, name=c.after, size=c.bytes))
        return ops

    def _count_heads(self, fp: ForwardPass) -> None:
        weight = fp.batch * fp.new_tokens
        for lp in fp.layers:
            if not lp.skipped:
                self._head_sum[lp.layer] += lp.heads_kept * weight
                self._head_weight[lp.layer] += weight

    # --- frames ---------------------------------------------------------------------

    def _forward_frame(self, sender: str, frame: TokenFrame) -> TokenFrame:
        fault = self.renumber.get(sender)
        if fault is None:
            return frame
        if fault.field == "token_id":
            count = self._forwarded[sender]
            self._forwarded[sender] += 1
            return TokenFrame(count % 2**32, frame.latency_hint, frame.ts_logical)
        return TokenFrame(frame.token_id, frame.latency_hint, round(self.env.now))

    def _record(
        self,
        req: _Request,
        frame: TokenFrame,
        sender: str,
        receiver: str,
        born: bool,
        t_emit: float,
        t_arrive: float,
    ) -> None:
        self.token_rows.add(
            workload=self.index,
            request=req.rid,
            token_id=frame.token_id,
            ts_logical=frame.ts_logical,
            latency_hint=frame.latency_hint,
            stage=sender,
            to_stage=receiver,
            born=born,
            t_emit_ns=t_emit,
            t_arrive_ns=t_arrive,
            wire=_wire(frame),
        )

    def _born(self, req: _Request, count: int, now: float) -> None:
        sampler = stage_name(len(self.stages) - 1)
        per_token_ms = (now - req.prev_ns) / count / NS_PER_MS
        hint = round(per_token_ms) if self.wl.frames.latency_hint == "measured" else 0
        ids = self.rng.integers(self.vocab, size=count)
        frames = [TokenFrame(int(i), hint, self.clock.tick()) for i in ids]
        for frame in frames:
            self._record(req, frame, sampler, EMITTER, True, now, now)
            out = self._forward_frame(EMITTER, frame)
            emit = float(req.pacer.emit(out, round(now))) if self.wl.frames.pacing else now
            self._record(req, out, EMITTER, CLIENT, False, emit, emit)
            req.t_client_last = emit
        if math.isnan(req.t_first):
            req.t_first = now
        req.t_last = now
        req.prev_ns = now
        req.produced += count
        req.kv += count
        req.inputs = frames

    def _tokens_out(self, req: _Request) -> int:
        spec = self.engine.config.speculation
        remaining = req.target - req.produced
        if spec is None:
            return 1
        accepted = 0
        while accepted < spec.gamma and self.rng.random() < spec.alpha:
            accepted += 1
        return min(accepted + 1, remaining)

    def _step_done(self, run: _StepRun) -> None:
        now = self.env.now
        fabric_ns = run.collective_ns + run.transfer_ns
        produced = 0
        for req in run.members:
            if not math.isnan(req.t_first):
                req.fabric_ns += fabric_ns
            count = 1 if run.phase == "prefill" else self._tokens_out(req)
            self._born(req, count, now)
            produced += count
        for req in self._running:
            if req not in run.members and not math.isnan(req.t_first):
                req.fabric_ns += fabric_ns
        self.step_rows.add(
            workload=self.index,
            step=run.step,
            phase=run.phase,
            batch=len(run.members),
            new_tokens=run.new_tokens,
            context=run.context,
            tokens_out=produced,
            t_start_ns=run.t_start,
            t_end_ns=now,
            compute_ns=run.compute_ns,
            collective_ns=run.collective_ns,
            transfer_ns=run.transfer_ns,
            launch_ns=run.launch_ns,
            all_reduces=run.all_reduces,
            all_reduce_bytes=run.all_reduce_bytes,
        )
        self._running = [r for r in self._running if r.produced < r.target]
        self.end_ns = max(self.end_ns, now)
        self._busy = False
        self._schedule()

    # --- tables ---------------------------------------------------------------------

    def tables(self) -> dict[str, pd.DataFrame]:
        return {
            "tokens": pd.DataFrame(self.token_rows.columns),
            "requests": self._requests_table(),
            "engine_layers": self._layers_table(),
            "mhf_layouts": pd.DataFrame(self.layout_rows.columns),
            "inference_steps": pd.DataFrame(self.step_rows.columns),
            "inference_collectives": pd.DataFrame(self.collective_rows.columns),
            "inference_spans": pd.DataFrame(self.span_rows.columns),
            "inference_stages": pd.DataFrame(
                {
                    "workload": self.index,
                    "stage": [stage_name(s) for s in range(len(self.stages))],
                    "gpus": [",".join(g) for g in self.stages],
                    "first_layer": [r.start for r in self.layer_ranges],
                    "layers": [len(r) for r in self.layer_ranges],
                }
            ),
        }

    def _requests_table(self) -> pd.DataFrame:
        reqs = self.requests
        first = np.array([r.t_first for r in reqs], dtype=float)
        last = np.array([r.t_last for r in reqs], dtype=float)
        produced = np.array([r.produced for r in reqs], dtype=np.int64)
        arrival = np.array([r.arrival_ns for r in reqs], dtype=float)
        decode_ns = last - first
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = np.where(produced > 1, decode_ns / (produced - 1), np.nan)
            fabric = np.array([r.fabric_ns for r in reqs], dtype=float)
            share = np.where(decode_ns > 0, fabric / decode_ns, np.nan)
        return pd.DataFrame(
            {
                "workload": np.full(len(reqs), self.index, dtype=np.int64),
                "request": np.array([r.rid for r in reqs], dtype=np.int64),
                "arrival_ns": arrival,
                "prompt_tokens": np.array([r.prompt for r in reqs], dtype=np.int64),
                "generated_tokens": np.array([r.target for r in reqs], dtype=np.int64),
                "tokens": produced,
                "ttft_ns": first - arrival,
                "tpot_ns": tpot,
                "e2e_ns": np.array([r.t_client_last for r in reqs], dtype=float) - arrival,
                "decode_ns": decode_ns,
                "fabric_ns": fabric,
                "fabric_share": share,
            }
        )

    def _layers_table(self) -> pd.DataFrame:
        n = self.model.n_layers
        with np.errstate(invalid="ignore", divide="ignore"):
            heads = np.where(self._head_weight > 0, self._head_sum / self._head_weight, np.nan)
        records = {r.layer: r for r in self.fp8_records}
        return pd.DataFrame(
            {
                "workload": np.full(n, self.index, dtype=np.int64),
                "layer": np.arange(n, dtype=np.int64),
                "format": [records[i].format if i in records else "off" for i in range(n)],
                "std": [records[i].std if i in records else math.nan for i in range(n)],
                "amax": [records[i].amax if i in records else math.nan for i in range(n)],
                "rel_error": [records[i].rel_error if i in records else math.nan for i in range(n)],
                "overflows": np.array(
                    [records[i].overflows if i in records else 0 for i in range(n)], dtype=np.int64
                ),
                "values": np.array(
                    [records[i].n_values if i in records else 0 for i in range(n)], dtype=np.int64
                ),
                "heads_kept": heads,
            }
        )


class _StepRun:
    """One step's walk through its ops; every wait is a callback, never a process."""

    def __init__(
        self,
        driver: InferenceDriver,
        step: int,
        phase: str,
        ops: list[_Op],
        members: list[_Request],
        new_tokens: int,
        context: int,
        inputs: bool,
    ) -> None:
        self.d = driver
        self.step = step
        self.phase = phase
        self.ops = ops
        self.members = members
        self.new_tokens = new_tokens
        self.context = context
        self.frames: list[tuple[_Request, TokenFrame]] = (
            [(req, f) for req in members for f in req.inputs] if inputs else []
        )
        self.i = 0
        self.t_start = driver.env.now
        self.compute_ns = 0.0
        self.collective_ns = 0.0
        self.transfer_ns = 0.0
        self.launch_ns = 0.0
        self._launch = driver.launches[phase]
        self._streams: dict[int, KernelStream] = {}
        self.all_reduces = 0
        self.all_reduce_bytes = 0

    def advance(self) -> None:
        ops, d = self.ops, self.d
        if self.i >= len(ops):
            d._step_done(self)
            return
        op = ops[self.i]
        if op.kind == "compute":
            self._compute()
        elif op.kind in OPERATIONS:
            self._collective(op)
        else:
            self._send(op)

    def _stream(self, stage: int) -> KernelStream:
        """The stage's kernel stream in this step; its host starts launching at the step's
        start."""
        stream = self._streams.get(stage)
        if stream is None:
            stream = self._launch(self.t_start, self.d.launch_costs)
            self._streams[stage] = stream
        return stream

    def _kernel_start(self, stage: int, ready_ns: float) -> float:
        start = self._stream(stage).start(ready_ns)
        self.launch_ns += start - ready_ns
        return start

    def _compute(self) -> None:
        """Run consecutive compute segments of one stage as one timeout, one span each; a
        segment's time is shared evenly by its kernels, each launched in turn."""
        d, ops = self.d, self.ops
        t = d.env.now
        stage = ops[self.i].stage
        while self.i < len(ops) and ops[self.i].kind == "compute" and ops[self.i].stage == stage:
            op = ops[self.i]
            if op.duration_ns > 0:
                per_kernel = op.duration_ns / op.kernels
                first = t = self._kernel_start(stage, t)
                t += per_kernel
                for _ in range(op.kernels - 1):
                    t = self._kernel_start(stage, t) + per_kernel
                name = f"L{op.layer} {op.name}" if op.layer >= 0 else op.name
                d.span_rows.add(
                    workload=d.index,
                    step=self.step,
                    stage=stage_name(stage),
                    kind="compute",
                    name=name,
                    t_start_ns=first,
                    t_end_ns=t,
                )
                self.compute_ns += op.duration_ns
            self.i += 1
        d.env.timeout(t - d.env.now).callbacks.append(lambda _ev: self.advance())

    def _collective(self, op: _Op) -> None:
        d = self.d
        start = self._kernel_start(op.stage, d.env.now)
        if start > d.env.now:
            d._at(start, lambda: self._run_collective(op, start))
        else:
            self._run_collective(op, start)

    def _run_collective(self, op: _Op, start: float) -> None:
        d = self.d
        gpus = d.stages[op.stage]
        algorithm = collective_runner(d.wl.collective, op.kind, len(gpus), op.size)
        run: CclRing | CclNvls | CustomAllReduce | None = None
        if algorithm == "custom":
            run = d.custom_call(gpus, op.size)
        elif algorithm == "auto":
            run = d.nccl_calls(op.stage, op.kind).run(op.size, None)
        protocol, channels = BARE_PROTOCOL, 0
        if run is not None:
            h = run.handle
            algorithm, protocol, channels = h.algorithm, h.protocol or BARE_PROTOCOL, h.channels
        label = f"L{op.layer} {op.name}" if op.layer >= 0 else op.name

        def done(end_ns: float) -> None:
            self.collective_ns += end_ns - start
            d.collective_rows.add(
                workload=d.index,
                step=self.step,
                stage=stage_name(op.stage),
                operation=op.kind,
                algorithm=algorithm,
                protocol=protocol,
                channels=channels,
                layer=op.layer,
                after=op.name,
                bytes=op.size,
                gpus=",".join(gpus),
                t_start_ns=start,
                t_end_ns=end_ns,
            )
            d.span_rows.add(
                workload=d.index,
                step=self.step,
                stage=stage_name(op.stage),
                kind=op.kind,
                name=f"{label} {op.kind} {op.size} B",
                t_start_ns=start,
                t_end_ns=end_ns,
            )
            self.advance()

        if op.kind == "all_reduce":
            self.all_reduces += 1
            self.all_reduce_bytes += op.size
        self.i += 1
        if run is not None:
            run.on_done = done
            run.start()
            return
        start_collective(
            op.kind,
            d.transport,
            gpus,
            op.size,
            algorithm=algorithm,
            tenant=d.tenant,
            workload=d.index,
            on_done=done,
            max_message_bytes=d.wl.max_message,
            min_messages=d.wl.min_messages,
        )

    def _send(self, op: _Op) -> None:
        """Activations (and, on rank 0, the frames) from stage s to stage s + 1; or feedback."""
        d = self.d
        feedback = op.kind == "feedback"
        src = op.stage
        dst = 0 if feedback else op.stage + 1
        sender, receiver = stage_name(src), stage_name(dst)
        start = d.env.now
        frame_bytes = FRAME_SIZE_BYTES * len(self.frames)
        sent = [(req, d._forward_frame(sender, f) if not feedback else f) for req, f in self.frames]
        transfers: list[tuple[str, str, int]] = []
        if feedback:
            transfers.append((d.stages[src][0], d.stages[dst][0], frame_bytes))
        else:
            for rank, (a, b) in enumerate(zip(d.stages[src], d.stages[dst], strict=True)):
                transfers.append((a, b, op.size + (frame_bytes if rank == 0 else 0)))
        node = d.transport.node_id
        messages = []
        for a, b, size in transfers:
            for offset in range(0, size, d.wl.max_message):
                messages.append((node[a], node[b], min(d.wl.max_message, size - offset)))
        pending = len(messages)

        def delivered(_msg: int) -> None:
            nonlocal pending
            pending -= 1
            if pending:
                return
            now = d.env.now
            self.transfer_ns += now - start
            d.span_rows.add(
                workload=d.index,
                step=self.step,
                stage=sender,
                kind="send",
                name=f"{sender}->{receiver}",
                t_start_ns=start,
                t_end_ns=now,
            )
            for req, frame in sent:
                d._record(req, frame, sender, receiver, feedback, start, now)
            self.frames = sent
            self.advance()

        self.i += 1
        for a, b, size in messages:
            d.transport.inject(a, b, size, d.tenant, KIND_DATA, d.index, on_deliver=delivered)


TokenFault = RenumberTokensFault | PacingIgnoresHintFault


@dataclass(frozen=True)
class InferenceSection:
    """What the inference drivers read: their workloads, the L5 token faults (by index in
    the scenario's ``faults:``) and the folder that relative trace and statistics paths
    are read from (the scenario file's)."""

    workloads: WorkloadSection[InferenceWorkload]
    faults: tuple[tuple[int, TokenFault], ...]
    base_dir: Path
    switches: SwitchCapabilities = field(default_factory=SwitchCapabilities)


def build_inference_workloads(
    section: InferenceSection, fabric: Fabric, transport: Transport, where: Locator
) -> list[InferenceDriver]:
    """A driver for every ``kind: inference`` workload, with the token faults aimed at it."""
    workloads = section.workloads.workloads
    faults: dict[int, list[tuple[int, TokenFault]]] = {i: [] for i, _ in workloads}
    for k, fault in section.faults:
        named = [i for i, wl in workloads if fault.workload in (None, wl.name)]
        if fault.workload is None and len(named) != 1:
            raise where.error(
                ("faults", k, "kind"),
                f"{len(named)} inference workloads: name the one this fault hits ('workload')",
            )
        if not named:
            names = [wl.name for _, wl in workloads if wl.name]
            raise where.error(
                ("faults", k, "workload"),
                f"no inference workload named {fault.workload!r}; named ones: {names}",
            )
        faults[named[0]].append((k, fault))
    drivers = []
    first_request = 0
    for i, wl in workloads:
        driver = InferenceDriver(section, where, fabric, transport, i, wl, faults[i], first_request)
        first_request += len(driver.requests)
        drivers.append(driver)
    return drivers


def start_inference_workloads(
    section: InferenceSection, fabric: Fabric, transport: Transport, where: Locator
) -> list[InferenceDriver]:
    """Build and arm every inference workload on ``transport``'s environment."""
    drivers = build_inference_workloads(section, fabric, transport, where)
    for driver in drivers:
        driver.start()
    if drivers:
        transport.expect_activity_until(max(d.horizon_ns() for d in drivers))
    return drivers


def inference_drivers(
    section: InferenceSection, fabric: Fabric, where: Locator
) -> dict[int, InferenceDriver]:
    """The drivers, by workload index, on a transport that never runs: what the checks and
    the resource estimate read (requests, model, stages) without simulating."""
    if not section.workloads.workloads and not section.faults:
        return {}
    nodes = sorted(fabric.graph)
    empty = Schedule(np.zeros(0), *(np.zeros(0, dtype=np.int64) for _ in range(6)))
    transport = Transport(simpy.Environment(), fabric, Router(fabric), nodes, empty)
    return {d.index: d for d in build_inference_workloads(section, fabric, transport, where)}


def check_inference_workloads(section: InferenceSection, fabric: Fabric, where: Locator) -> None:
    """Everything the drivers would reject (GPUs, traces, faults), without simulating."""
    inference_drivers(section, fabric, where)


def inference_tables(drivers: list[InferenceDriver]) -> dict[str, pd.DataFrame]:
    """The drivers' tables, concatenated over workloads, each with a ``row`` id column."""
    parts: dict[str, list[pd.DataFrame]] = {}
    for driver in drivers:
        for name, table in driver.tables().items():
            parts.setdefault(name, []).append(table)
    out = {}
    for name, tables in parts.items():
        table = pd.concat(tables, ignore_index=True)
        table.insert(0, "row", np.arange(len(table), dtype=np.int64))
        out[name] = table
    if "tokens" in out:
        out["tokens"] = out["tokens"].astype(
            {
                "workload": np.int64,
                "request": np.int64,
                "token_id": np.int64,
                "ts_logical": np.uint64,
                "latency_hint": np.int64,
                "born": bool,
                "t_emit_ns": float,
                "t_arrive_ns": float,
            }
        )
    return out


def _quantiles(values: np.ndarray) -> dict[str, float | None]:
    return sample_summary(values[np.isfinite(values)], ("mean", "p50", "p99"))


def inference_metrics(
    drivers: list[InferenceDriver], tables: dict[str, pd.DataFrame]
) -> dict[str, object]:
    """Per workload: TTFT, TPOT and the fabric's share of it, collectives per decode token."""
    out: dict[str, object] = {}
    for driver in drivers:
        i = driver.index
        reqs = tables["requests"][tables["requests"]["workload"] == i]
        steps = tables["inference_steps"]
        decode = steps[(steps["workload"] == i) & (steps["phase"] == "decode")]
        tokens = decode["tokens_out"].sum()
        duration = (decode["t_end_ns"] - decode["t_start_ns"]).sum()
        fabric = (decode["collective_ns"] + decode["transfer_ns"]).sum()
        launch = decode["launch_ns"].sum()
        n_reduces = int(decode["all_reduces"].sum())
        reduce_bytes = int(decode["all_reduce_bytes"].sum())
        out[driver.wl.name or f"#{i}"] = {
            "requests": len(reqs),
            "tokens": int(reqs["tokens"].sum()),
            "ttft_ns": _quantiles(reqs["ttft_ns"].to_numpy()),
            "tpot_ns": _quantiles(reqs["tpot_ns"].to_numpy()),
            "e2e_ns": _quantiles(reqs["e2e_ns"].to_numpy()),
            "decode_tokens": int(tokens),
            "decode_time_per_token_ns": float(duration / tokens) if tokens else None,
            "fabric_share_of_decode": float(fabric / duration) if duration > 0 else None,
            "launch_share_of_decode": float(launch / duration) if duration > 0 else None,
            "launch": {
                "decode": driver.wl.engine.launch.decode,
                "prefill": driver.wl.engine.launch.prefill,
            },
            "all_reduces_per_decode_token": float(n_reduces / tokens) if tokens else None,
            "mean_decode_all_reduce_bytes": float(reduce_bytes / n_reduces) if n_reduces else None,
            "engine_notes": list(driver.engine.notes),
        }
    return out
