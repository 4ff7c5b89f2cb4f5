"""The fast path: batch-1 decoding with nothing in the step but the forward and the sample.

The engine (``engine.py``) calls Hugging Face's ``GPT2LMHeadModel.forward`` every step: masks, cache
objects and output classes are rebuilt each time. ``FastDecoder`` runs the same arithmetic on the
model's weights (plain tensors from ``_hf.block_tensors``) with a pre-allocated KV cache (per layer
``[batch, heads, max_tokens, head_dim]``), a ten-line block and SDPA attention. Three modules:

- ``fast.decoder``: ``FastDecoder``, the readable decoder (``prefill``, ``step``, ``generate``).
- ``fast.layouts``: how the matrices are held (``Proj``, ``BlockWeights``, ``block_weights``, oneDNN packing).
- ``fast.choice``: which layout ``weights="auto"`` takes on this machine, measured and remembered.

More tricks, each a switch of ``FastDecoder``:

- ``weights``: how the matrices are held for the matrix-vector products. ``"tied"``: the model's own
  tensors (bitwise the engine's logits). ``"transposed"``: plus a ``[d_model, vocab]`` copy of the LM
  head, GPT-2's largest matrix, which some matrix libraries stream faster than ``F.linear(h, wte)``.
  ``"packed"``: every matrix pre-packed for oneDNN (``torch.ops.mkldnn._reorder_linear_weight``, what
  ``torch.compile`` does with frozen weights), each product on all cores, the GELU inside its product.
  ``"rows"``: each block matrix as a plain ``[out, in]`` copy, for the compiled reductions below.
  ``"auto"`` (the default) measures them here and keeps the fastest (``fast.choice``): no
  layout wins on every CPU. Copies cost memory (``extra_bytes``).
- ``compile=True``: ``torch.compile`` of a fixed-shape step (the cache read whole, empty slots masked).
  With ``"rows"`` each product is written as ``(W * x).sum(-1)`` and the attention as sums: Inductor
  turns the step into streaming loops, each fused with the bias, norm or GELU around it, no Python
  between operators.
- The prompt (prefill) always runs eagerly, and its products are matrix-matrix products on the model's
  own ``[in, out]`` weights (``torch.addmm``, as Hugging Face's ``Conv1D``), whatever the layout: the
  layouts above are for one row at a time. Measured here (GPT-2 small, 256 tokens, 2 threads), oneDNN's
  batch-1 packing ran the prompt's products at 133 GFLOP/s against 153 for ``addmm``, and its fused GELU
  cost more than the separate one. The products write into buffers made once per prompt and reused by
  every block (``PromptScratch``), and the GELU and the residual adds work in place: a fresh
  multi-megabyte tensor per operation cost about a tenth of the prefill here (GPT-2 small, 256
  tokens: 441 -> 412 ms median, interleaved), with the same operations in the same order, so the
  logits stay bitwise the engine's. Every layout but ``"tied"`` (the bitwise one) then takes PyTorch's
  one-pass tanh GELU for the prompt instead of Hugging Face's eight operations: about 4% of the
  prefill here, same greedy tokens.
- ``cuda_graph`` (CUDA only, on by default there): the fixed-shape step is recorded once as a CUDA
  graph and replayed, so hundreds of kernel launches cost one.

Greedy and seeded output is token-for-token that of ``inferlab.generate`` (``tests/test_fast.py``).

    >>> from inferlab import fast                                     # doctest: +SKIP
    >>> fast.FastDecoder(m, 128).generate("ROMEO.", 20).latency       # doctest: +SKIP
"""

from __future__ import annotations

from . import choice, layouts
from .choice import Choice
from .decoder import FastDecoder
from .layouts import (
    WEIGHTS,
    BlockWeights,
    Proj,
    PromptScratch,
    block_weights,
    gelu_new,
    gelu_new_,
    linear_onednn,
    onednn_packing,
)

__all__ = [
    "WEIGHTS",
    "BlockWeights",
    "Choice",
    "FastDecoder",
    "Proj",
    "PromptScratch",
    "block_weights",
    "choice",
    "gelu_new",
    "gelu_new_",
    "layouts",
    "linear_onednn",
    "onednn_packing",
]
