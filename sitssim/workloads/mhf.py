"""The MHF marker (§2.4) and what a consumer derives from a marked token buffer.

Theory of operation
-------------------
A token buffer is a run of token ids, each a little-endian uint32. A producer in
MHF mode prepends one 4-byte marker word, 0x80000001, ahead of the real ids
(:func:`prepend_marker`). The marker is a valid uint32, so a consumer that does
not know about it reads it as one more token.

:func:`derive_layout` plays the consumer: it decodes the buffer, decides which
words are tokens (mode ``"naive"``: all of them; mode ``"strip"``: all but a
leading marker), appends them to a KV cache, builds the attention mask over the
cache and derives RoPE position ids from the mask the way Hugging Face
Transformers does (``cumsum(mask) - 1``). The lengths and positions it reports
are read off those arrays, so a naive consumer's +1 on KV length, mask length
and RoPE offset comes out of the processing rather than being added. Clause
``token.mhf_kv_alignment`` compares them with the real token count.

The marker is only recognised as the first word; a producer refuses a real token
id equal to the marker, which would make the buffer ambiguous.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

MHF_MARKER = 0x80000001
MHF_MARKER_BYTES = MHF_MARKER.to_bytes(4, "little")
TOKEN_WORD_DTYPE = np.dtype("<u4")
TOKEN_WORD_BYTES = TOKEN_WORD_DTYPE.itemsize

MhfMode = Literal["naive", "strip"]


@dataclass(frozen=True, eq=False)
class ConsumerLayout:
    """What a consumer built from one token buffer.

    ``kv_tokens`` are the ids it cached (one KV slot each), ``attention_mask`` its
    mask over the cache, ``rope_positions`` the RoPE position id of each cached
    entry, and ``rope_offset`` the position the next decoded token would take.
    """

    kv_tokens: npt.NDArray[np.uint32]
    attention_mask: npt.NDArray[np.int64]
    rope_positions: npt.NDArray[np.int64]

    @property
    def kv_length(self) -> int:
        """Number of KV-cache slots filled."""
        return int(self.kv_tokens.size)

    @property
    def attention_mask_length(self) -> int:
        """Length of the attention mask."""
        return int(self.attention_mask.size)

    @property
    def rope_offset(self) -> int:
        """RoPE position of the next token: one past the last cached position."""
        return int(self.rope_positions[-1]) + 1 if self.rope_positions.size else 0


def _token_words(tokens: bytes | bytearray | memoryview | npt.ArrayLike) -> np.ndarray:
    if isinstance(tokens, bytes | bytearray | memoryview):
        if len(tokens) % TOKEN_WORD_BYTES:
            raise ValueError(f"token buffer length {len(tokens)} is not a multiple of 4 bytes")
        return np.frombuffer(tokens, dtype=TOKEN_WORD_DTYPE)
    ids = np.asarray(tokens)
    if ids.size == 0:
        return np.empty(0, dtype=TOKEN_WORD_DTYPE)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"token ids must be integers, got dtype {ids.dtype}")
    bad = np.flatnonzero((ids < 0) | (ids > np.iinfo(np.uint32).max))
    if bad.size:
        raise ValueError(f"token id {ids.ravel()[bad[0]]} at index {bad[0]} is not a uint32")
    return ids.ravel().astype(TOKEN_WORD_DTYPE)


def prepend_marker(tokens: bytes | bytearray | memoryview | npt.ArrayLike) -> bytes:
    """The MHF buffer for a run of token ids (uint32 values, or their little-endian bytes).

    ValueError if an id equals the marker: the consumer could not tell them apart.
    """
    words = _token_words(tokens)
    clash = np.flatnonzero(words == MHF_MARKER)
    if clash.size:
        raise ValueError(f"token id at index {clash[0]} equals the MHF marker {MHF_MARKER:#010x}")
    return MHF_MARKER_BYTES + words.tobytes()


def derive_layout(buffer: bytes | bytearray | memoryview, mode: MhfMode) -> ConsumerLayout:
    """Consume a token buffer in ``mode`` and return the KV / mask / RoPE layout built."""
    if mode not in get_args(MhfMode):
        raise ValueError(f"mode={mode!r} is not one of {get_args(MhfMode)}")
    words = _token_words(buffer)
    if mode == "strip" and words.size and words[0] == MHF_MARKER:
        words = words[1:]
    kv_tokens = words.astype(np.uint32)
    attention_mask = np.ones(kv_tokens.size, dtype=np.int64)
    rope_positions = np.cumsum(attention_mask) - 1
    return ConsumerLayout(kv_tokens, attention_mask, rope_positions)
