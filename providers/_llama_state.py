"""Saved KV-cache states for a llama-cpp-python `Llama`, so a side call does not evict
the conversation's prefix.

llama.cpp keeps one sequence: a call with another prompt (a retry without tools, a
summary, a classifier) overwrites the cached prefix, and the conversation's next call
evaluates its whole prompt again (measured on the demo: ~660 prompt tokens instead of
~20). `keep_prompt_states(llama, capacity_bytes)` gives the `Llama` a prompt cache: the
state after each call is kept (up to `capacity_bytes`, the least recently used dropped),
and a call whose prompt shares a longer prefix with a kept state than with the current
one starts from that state. It uses llama-cpp-python's own cache hooks (`set_cache`, a
`LlamaRAMCache`) with a slim state: only llama.cpp's own state (its KV cells in use) and
the token ids, not the `n_batch x n_vocab` score matrix that `Llama.save_state` copies
(300 MB for a Qwen vocabulary), which is not needed: a restored prefix always has at
least one token evaluated again before sampling.
"""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["keep_prompt_states"]


def keep_prompt_states(llama: Any, capacity_bytes: int) -> None:
    """Give `llama` (a `llama_cpp.Llama`) a prompt cache of `capacity_bytes` slim states."""
    import llama_cpp
    import numpy as np
    from llama_cpp.llama import LlamaState
    from llama_cpp.llama_cache import LlamaRAMCache

    no_scores = np.zeros((0, 0), dtype=np.single)

    def save_state() -> LlamaState:
        ctx = llama._ctx.ctx
        size = int(llama_cpp.llama_state_get_size(ctx))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_get_data(ctx, buffer, size))
        if written > size:
            raise RuntimeError("llama.cpp wrote more state than it announced")
        return LlamaState(
            input_ids=llama.input_ids.copy(),
            scores=no_scores,
            n_tokens=llama.n_tokens,
            llama_state=ctypes.string_at(buffer, written),
            llama_state_size=written,
            seed=llama._seed,
        )

    def load_state(state: LlamaState) -> None:
        size = state.llama_state_size
        data = (ctypes.c_uint8 * size).from_buffer_copy(state.llama_state)
        if int(llama_cpp.llama_state_set_data(llama._ctx.ctx, data, size)) != size:
            raise RuntimeError("llama.cpp did not take the saved state")
        llama.input_ids = state.input_ids.copy()
        llama.n_tokens = state.n_tokens
        llama._seed = state.seed
        llama._requires_eval = True  # logits are not restored: evaluate a token again

    # Instance attributes: `Llama` calls `self.save_state()` / `self.load_state(...)`.
    llama.save_state = save_state
    llama.load_state = load_state
    llama.set_cache(LlamaRAMCache(capacity_bytes=capacity_bytes))
