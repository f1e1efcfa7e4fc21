"""Stateful property test of the L5 token cores: one request's frames from the sampler's
logical clock, through the 14-byte codec on every hop and the forwarding stages, to the
emitter's pacer and the client (token.frame_format, token.passthrough, token.emit_window).

One rule per protocol event: the sampler makes a token (a clock tick and a frame; the
codec puts it on the first hop, or refuses a hint beyond int16 and nothing is sent); a
stage forwards the frame at the head of its inbound hop (decode, encode, send on); the
emitter paces the frame at the head of its hop and hands it to the client, or a burst of
frames in one call; time passes. One invariant per clause, each against the spec restated
here: every byte string on a hop is the ``'<IhQ'`` layout of a frame the sampler sent
(token.frame_format); the client's frames, then those still on the hops, are the frames
sent, in order, none lost, renumbered or duplicated (token.passthrough); each frame
reached the client at its ready time or its window (hint + 5 ms, else 5 ms) after the
previous, whichever is later (token.emit_window). And the clock's own: a tick gives one
more than the last, and never wraps; the stamps sent strictly increase.
"""

from __future__ import annotations

import struct
from collections import deque
from itertools import pairwise

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from sitssim.protocol.token_frames import (
    ClockWrapError,
    FrameRangeError,
    LogicalClock,
    Pacer,
    TokenFrame,
    decode,
    encode,
)

SPEC_LAYOUT = struct.Struct("<IhQ")
HINT_RANGE = (-(2**15), 2**15 - 1)
U64_MAX = 2**64 - 1
MS = 1_000_000


def spec_window_ns(hint: int) -> int:
    return (hint + 5 if hint > 0 else 5) * MS


hints = st.sampled_from([HINT_RANGE[0] - 1, -1, 0, 1, HINT_RANGE[1], HINT_RANGE[1] + 1]) | (
    st.integers(HINT_RANGE[0] - 100, HINT_RANGE[1] + 100)
)


class TokenStream(RuleBasedStateMachine):
    """Sampler -> hop 0 -> stage 0 -> hop 1 -> ... -> hop ``depth`` -> emitter -> client."""

    @initialize(
        depth=st.integers(0, 3),
        start=st.sampled_from([0, 1, 2**32, U64_MAX - 3, U64_MAX]),
    )
    def setup(self, depth: int, start: int) -> None:
        self.clock = LogicalClock(start)
        self.hops: list[deque[bytes]] = [deque() for _ in range(depth + 1)]
        self.pacer = Pacer()
        self.now = 0
        # The oracle: stamps the clock owes, frames sent, frames the client got.
        self.next_stamp = start
        self.sent: list[TokenFrame] = []
        self.client: list[tuple[TokenFrame, int, int]] = []  # (frame, ready, emitted)

    # -- rules: one per protocol event ---------------------------------------------------
    @rule(token_id=st.integers(0, 2**32 - 1), hint=hints)
    def sampler_makes_a_token(self, token_id: int, hint: int) -> None:
        if self.next_stamp > U64_MAX:
            try:
                self.clock.tick()
            except ClockWrapError:
                assert self.clock.last == U64_MAX
                return
            raise AssertionError("the logical clock wrapped")
        stamp = self.clock.tick()
        assert stamp == self.next_stamp
        self.next_stamp += 1
        frame = TokenFrame(token_id, hint, stamp)
        try:
            wire = encode(frame)
        except FrameRangeError as error:
            assert (error.field, error.value) == ("latency_hint", hint)
            assert not HINT_RANGE[0] <= hint <= HINT_RANGE[1]
            return
        assert HINT_RANGE[0] <= hint <= HINT_RANGE[1]
        self.hops[0].append(wire)
        self.sent.append(frame)

    @precondition(lambda self: any(self.hops[:-1]))
    @rule(data=st.data())
    def stage_forwards_a_frame(self, data: st.DataObject) -> None:
        busy = [k for k, hop in enumerate(self.hops[:-1]) if hop]
        k = data.draw(st.sampled_from(busy), label="stage")
        self.hops[k + 1].append(encode(decode(self.hops[k].popleft())))

    @precondition(lambda self: self.hops[-1])
    @rule()
    def emitter_paces_a_frame(self) -> None:
        frame = decode(self.hops[-1].popleft())
        self.client.append((frame, self.now, self.pacer.emit(frame, self.now)))

    @precondition(lambda self: self.hops[-1])
    @rule(n=st.integers(1, 5))
    def emitter_paces_a_burst(self, n: int) -> None:
        frames = [decode(self.hops[-1].popleft()) for _ in range(min(n, len(self.hops[-1])))]
        emitted = self.pacer.pace(frames, [self.now] * len(frames))
        self.client.extend((f, self.now, int(t)) for f, t in zip(frames, emitted, strict=True))

    @rule(dt=st.integers(0, 40_000 * MS))
    def time_passes(self, dt: int) -> None:
        self.now += dt

    # -- invariants: one per clause ------------------------------------------------------
    @invariant()
    def every_frame_on_a_hop_is_the_spec_layout_of_one_sent(self) -> None:
        # token.frame_format
        sent = {SPEC_LAYOUT.pack(f.token_id, f.latency_hint, f.ts_logical) for f in self.sent}
        assert all(wire in sent for hop in self.hops for wire in hop)

    @invariant()
    def frames_pass_through_unchanged_in_order(self) -> None:
        # token.passthrough: delivered first, then the oldest frames still on the hops.
        on_hops = [TokenFrame(*SPEC_LAYOUT.unpack(w)) for hop in reversed(self.hops) for w in hop]
        assert [f for f, _, _ in self.client] + on_hops == self.sent

    @invariant()
    def each_frame_leaves_at_its_window_or_ready_time(self) -> None:
        # token.emit_window
        previous = None
        for frame, ready, emitted in self.client:
            earliest = (
                ready
                if previous is None
                else max(ready, previous + spec_window_ns(frame.latency_hint))
            )
            assert emitted == earliest
            previous = emitted

    @invariant()
    def stamps_strictly_increase(self) -> None:
        stamps = [f.ts_logical for f in self.sent]
        assert all(a < b <= U64_MAX for a, b in pairwise(stamps))


TestTokenStream = TokenStream.TestCase
