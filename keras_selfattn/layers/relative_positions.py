"""Helpers for relative position handling inside attention (keras.ops only).

* `relative_position_indices`: the clipped offsets ``clip(j - i, -k, k) + k`` of
  Shaw et al. 2018, as row indices into a ``(2k + 1, head_size)`` table.
* `rotary_embedding`: rotary position embeddings (RoPE, Su et al. 2021) applied to
  queries or keys: feature pair ``(2m, 2m + 1)`` of position ``p`` is rotated by
  the angle ``p * max_wavelength^(-2m / head_size)``, the frequencies of the
  sinusoidal table. The angles are computed in float32 from integer positions
  (float16 positions drift: see `PositionalEncoding`), the rotation runs in float32
  and the result is cast back to the input dtype once.
"""

from keras import ops


def relative_position_indices(
    num_queries, num_keys, max_relative_position, query_start=0
):
    """(Tq, Tk) int32 indices ``clip(j - i, -k, k) + k`` into a (2k + 1)-row table.

    Args:
        num_queries: Tq (int or scalar tensor).
        num_keys: Tk (int or scalar tensor).
        max_relative_position: k, the largest offset told apart; larger offsets
            share the edge rows.
        query_start: position of query 0 among the keys (0 for self-attention).
    """
    queries = ops.arange(num_queries, dtype="int32") + ops.cast(query_start, "int32")
    keys = ops.arange(num_keys, dtype="int32")
    offsets = keys[None, :] - queries[:, None]
    k = max_relative_position
    return ops.clip(offsets, -k, k) + k


def rotary_embedding(x, max_wavelength=10000.0, start=0):
    """Rotates feature pairs of ``x`` (B, T, H, D) by position-dependent angles.

    Args:
        x: float tensor ``(batch, T, heads, head_size)``; ``head_size`` even.
        max_wavelength: the base of the frequencies (10000 as in the sinusoidal
            table and the RoFormer paper).
        start: position of ``x[:, 0]``.

    Returns:
        A tensor of ``x``'s shape and dtype. ``<rope(q, i), rope(k, j)>`` depends on
        ``i`` and ``j`` only through ``j - i``.
    """
    dtype = x.dtype
    head_size = x.shape[-1]
    length = ops.shape(x)[1]
    positions = ops.cast(
        ops.arange(length, dtype="int32") + ops.cast(start, "int32"), "float32"
    )
    exponents = ops.arange(0, head_size, 2, dtype="float32") / float(
        head_size
    )  # 2m / D
    inverse_frequencies = ops.power(ops.cast(max_wavelength, "float32"), -exponents)
    angles = positions[:, None] * inverse_frequencies[None, :]  # (T, D/2)
    cos = ops.cos(angles)[None, :, None, :]
    sin = ops.sin(angles)[None, :, None, :]
    x = ops.cast(x, "float32")
    pairs = ops.reshape(
        x, (ops.shape(x)[0], length, ops.shape(x)[2], head_size // 2, 2)
    )
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = ops.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return ops.cast(ops.reshape(rotated, ops.shape(x)), dtype)
