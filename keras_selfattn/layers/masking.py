"""Masking helpers shared by the attention layers (keras.ops only).

Conventions used throughout the package:

* A *key mask* is boolean, True where a key may be attended to. It is (B, Tk)
  for one mask per sequence, or (B, Tq, Tk) for one per query.
* ``valid_lens`` follow Dive into Deep Learning (section 11.3): shape (B,) keeps
  keys ``0 .. valid_len - 1`` for every query; shape (B, Tq) gives each query its
  own length. Keys at positions >= valid_len get weight 0.
* Softmax over masked logits runs in float32 whatever the compute dtype, so a
  large negative fill can never overflow float16, and a row in which every key is
  masked comes out as zeros rather than NaN or a uniform distribution.
"""

from keras import ops


def valid_lens_to_mask(valid_lens, num_keys, num_queries=None):
    """Turns d2l-style valid lengths into a boolean key mask.

    Args:
        valid_lens: int tensor of shape (B,) or (B, Tq).
        num_keys: number of keys Tk (int or scalar tensor).
        num_queries: optional Tq. When given and ``valid_lens`` is (B,), the mask
            is broadcast to (B, Tq, Tk); otherwise a (B,) input gives (B, Tk).

    Returns:
        bool tensor: (B, Tk) for (B,) lengths without ``num_queries``,
        (B, Tq, Tk) otherwise.
    """
    valid_lens = ops.convert_to_tensor(valid_lens)
    rank = len(valid_lens.shape)
    if rank not in (1, 2):
        raise ValueError(
            "valid_lens must have shape (batch,) or (batch, num_queries). "
            f"Received: valid_lens.shape={tuple(valid_lens.shape)}"
        )
    valid_lens = ops.cast(valid_lens, "int32")
    positions = ops.arange(num_keys, dtype="int32")
    mask = positions < ops.expand_dims(valid_lens, -1)  # (B, Tk) or (B, Tq, Tk)
    if rank == 1 and num_queries is not None:
        mask = ops.broadcast_to(
            ops.expand_dims(mask, 1),
            (ops.shape(mask)[0], num_queries, ops.shape(mask)[-1]),
        )
    return mask


def causal_mask(num_queries, num_keys):
    """(Tq, Tk) boolean lower-triangular mask: query i sees keys 0..i."""
    rows = ops.expand_dims(ops.arange(num_queries, dtype="int32"), -1)
    cols = ops.expand_dims(ops.arange(num_keys, dtype="int32"), 0)
    return cols <= rows


def combine_masks(*masks):
    """Logical AND of the masks that are not None (broadcasting); None if all are."""
    result = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        result = mask if result is None else ops.logical_and(result, mask)
    return result


def masked_softmax(logits, mask=None, axis=-1):
    """Softmax over ``axis`` that ignores masked positions, computed in float32.

    Args:
        logits: float tensor of any float dtype.
        mask: optional boolean tensor broadcastable to ``logits``; True keeps.
        axis: the axis to normalize over (the keys).

    Returns:
        float32 weights of ``logits``' shape. Masked positions are exactly 0; a
        row with every position masked is all zeros (never NaN).
    """
    logits = ops.cast(logits, "float32")
    if mask is None:
        return ops.softmax(logits, axis=axis)
    mask = ops.cast(mask, "bool")
    # The float32 minimum is finite, so exp(min - max) underflows to 0 cleanly.
    logits = ops.where(mask, logits, ops.full_like(logits, -3.4028235e38))
    weights = ops.softmax(logits, axis=axis)
    # Zero the masked positions: this turns a fully masked row (uniform after
    # the softmax) into zeros.
    return weights * ops.cast(mask, "float32")
