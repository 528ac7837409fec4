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

import keras
from keras import ops

__all__ = [
    "FLOAT32_MIN",
    "causal_mask",
    "check_valid_lens",
    "combine_masks",
    "keeps_a_key",
    "masked_softmax",
    "valid_lens_to_mask",
    "valid_lens_to_mask_for_keys",
]

# The fill of hidden logits. The softmax runs in float32, whose minimum is finite:
# exp(FLOAT32_MIN - max) underflows to exactly 0, and sums of it never give NaN.
FLOAT32_MIN = -3.4028235e38


def valid_lens_to_mask(valid_lens, num_keys, num_queries=None):
    """Turns d2l-style valid lengths into a boolean key mask.

    Positions are compared with the lengths in the lengths' own dtype, never
    after a cast: an int64 length of 2**33 keeps every key (a cast to int32
    would wrap it to 0), a negative length keeps none, and a float NaN length
    keeps none (every comparison with NaN is False), so the query attends to
    nothing and gets zero weights. These are defined results under XLA too.

    Args:
        valid_lens: int or float tensor of shape (B,) or (B, Tq).
        num_keys: number of keys Tk (int or scalar tensor).
        num_queries: optional Tq. When given and ``valid_lens`` is (B,), the mask
            is broadcast to (B, Tq, Tk); otherwise a (B,) input gives (B, Tk).

    Returns:
        bool tensor: (B, Tk) for (B,) lengths without ``num_queries``,
        (B, Tq, Tk) otherwise.

    Example:

    >>> import numpy as np
    >>> from keras_selfattn.layers import valid_lens_to_mask
    >>> np.asarray(valid_lens_to_mask(np.array([1, 3]), 3)).tolist()
    [[True, False, False], [True, True, True]]
    """
    valid_lens = _checked_lengths(valid_lens, ranks=(1, 2))
    positions = ops.arange(num_keys, dtype="int32")
    mask = _below(positions, valid_lens)  # (B, Tk) or (B, Tq, Tk)
    if len(valid_lens.shape) == 1 and num_queries is not None:
        mask = ops.broadcast_to(
            ops.expand_dims(mask, 1),
            (ops.shape(mask)[0], num_queries, ops.shape(mask)[-1]),
        )
    return mask


def valid_lens_to_mask_for_keys(valid_lens, keys):
    """`valid_lens_to_mask` of (B,) lengths for the keys (B, Tk, ...) of ``keys``.

    The positions are counted along the keys of the tensor itself, not made
    from its length: on a ``keras.Input`` whose length is None (a functional
    model built outside any layer, e.g. the states that
    `BahdanauDecoderCell.get_initial_state_for_memory` makes for
    ``keras.layers.RNN``) there is no length to make them from, on any backend.

    Args:
        valid_lens: int or float tensor of shape (B,); compared as in
            `valid_lens_to_mask`.
        keys: tensor of shape (B, Tk, ...).

    Returns:
        bool tensor (B, Tk), True where the position is below the length.

    Example:

    >>> import numpy as np
    >>> from keras_selfattn.layers.masking import valid_lens_to_mask_for_keys
    >>> keys = np.zeros((2, 3, 4), "float32")
    >>> np.asarray(valid_lens_to_mask_for_keys(np.array([1, 3]), keys)).tolist()
    [[True, False, False], [True, True, True]]
    """
    valid_lens = _checked_lengths(valid_lens, ranks=(1,))
    ones = ops.ones_like(keys[:, :, 0], dtype="int32")  # (B, Tk)
    positions = ops.cumsum(ones, axis=1) - ones  # 0 .. Tk - 1 in every row
    return _below(positions, valid_lens)


def _checked_lengths(valid_lens, ranks):
    """``valid_lens`` as a tensor of one of ``ranks``, integer or float32."""
    valid_lens = ops.convert_to_tensor(valid_lens)
    if len(valid_lens.shape) not in ranks:
        allowed = "(batch,)" if ranks == (1,) else "(batch,) or (batch, num_queries)"
        raise ValueError(
            f"valid_lens must have shape {allowed}. "
            f"Received: valid_lens.shape={tuple(valid_lens.shape)}"
        )
    dtype = keras.backend.standardize_dtype(valid_lens.dtype)
    if dtype == "bool" or "int" not in dtype and "float" not in dtype:
        raise ValueError(
            f"valid_lens must hold integer lengths. Received: valid_lens.dtype={dtype}"
        )
    if "float" in dtype:
        valid_lens = ops.cast(valid_lens, "float32")
    return valid_lens


def _below(positions, valid_lens):
    """``positions < valid_lens`` over a new last axis of the lengths, compared in
    the lengths' dtype (int positions cast to it, never the lengths cast)."""
    positions = ops.cast(positions, valid_lens.dtype)
    return positions < ops.expand_dims(valid_lens, -1)


def check_valid_lens(valid_lens, batch_size, num_queries=None, name="valid_lens"):
    """Checks lengths against the inputs' batch; returns them as a tensor.

    What is known when the layer is called (ranks, and the sizes of eager or
    statically shaped tensors) is checked here with a Keras-style ValueError: a
    ``(1,)`` ``valid_lens`` for a batch of 2 is an error, not a broadcast.

    A size known only at run time (a ``tf.function`` traced with an unknown batch)
    cannot be checked by ``keras.ops`` code: TensorFlow's graph optimizer removes
    a reshape that would pin it, and XLA has no assertions. There the lengths
    broadcast as NumPy does: a batch-1 ``valid_lens`` applies to every row, and
    any other mismatch fails in the backend's broadcasting.

    Args:
        valid_lens: array-like, (B,) or, when ``num_queries`` is given, (B, Tq).
        batch_size: the batch size B of the inputs (int, None or scalar tensor).
        num_queries: Tq when per-query lengths are allowed; None allows (B,) only.
        name: the argument's name in error messages.

    Returns:
        ``valid_lens`` as a tensor.
    """
    valid_lens = ops.convert_to_tensor(valid_lens)
    shape = tuple(valid_lens.shape)
    allowed = "(batch,)" + ("" if num_queries is None else " or (batch, num_queries)")
    if len(shape) not in ((1,) if num_queries is None else (1, 2)):
        raise ValueError(
            f"{name} must have shape {allowed}. Received: {name}.shape={shape}"
        )
    static_batch = batch_size if isinstance(batch_size, int) else None
    static_queries = num_queries if isinstance(num_queries, int) else None
    expected = (static_batch,) + ((static_queries,) if len(shape) == 2 else ())
    for got, want in zip(shape, expected):
        if got is not None and want is not None and got != want:
            raise ValueError(
                f"{name} must have shape {allowed} for inputs of batch size "
                f"{static_batch}"
                + ("" if static_queries is None else f" and {static_queries} queries")
                + f". Received: {name}.shape={shape}"
            )
    return valid_lens


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


def keeps_a_key(mask, axis=-1):
    """Whether each row of a key mask keeps at least one key; None for no mask.

    The one rule for a query whose keys are all masked: what it produces (its
    weights, its context) is multiplied by this, so it is zeros, never NaN nor
    the uniform average that a softmax over equal fills gives.

    Args:
        mask: optional boolean key mask, True keeps; the keys along ``axis``.
        axis: the keys' axis; kept, with size 1, so the result broadcasts.

    Example:

    >>> import numpy as np
    >>> from keras_selfattn.layers.masking import keeps_a_key
    >>> np.asarray(keeps_a_key(np.array([[True, False], [False, False]]))).tolist()
    [[True], [False]]
    """
    if mask is None:
        return None
    return ops.any(ops.cast(mask, "bool"), axis=axis, keepdims=True)


def masked_softmax(logits, mask=None, axis=-1, zero_fully_masked=True):
    """Softmax over ``axis`` that ignores masked positions, computed in float32.

    Masked logits are replaced by `FLOAT32_MIN` (a scalar fill, no full-size
    constant), so they get weight exactly 0 wherever one position is kept.

    Args:
        logits: float tensor of any float dtype.
        mask: optional boolean tensor broadcastable to ``logits``; True keeps.
        axis: the axis to normalize over (the keys).
        zero_fully_masked: when True (default), a row with every position masked
            is all zeros (the product with the mask). When False such a row is
            left uniform, for a caller that zeroes what the row produces more
            cheaply itself with `keeps_a_key` (`MultiHeadSelfAttention` zeroes
            the row's context).

    Returns:
        float32 weights of ``logits``' shape. Masked positions are exactly 0 in
        every row that keeps at least one position; never NaN.

    Note: Dive into Deep Learning's ``masked_softmax`` fills with -1e6, so a row
    whose keys are all masked gets uniform weights there; here it gets zeros (a
    query with nothing to attend to attends to nothing).

    Example:

    >>> import numpy as np
    >>> from keras_selfattn.layers import masked_softmax
    >>> logits = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], "float32")
    >>> mask = np.array([[True, True, False], [False, False, False]])
    >>> np.asarray(masked_softmax(logits, mask), "float64").round(4).tolist()
    [[0.2689, 0.7311, 0.0], [0.0, 0.0, 0.0]]
    """
    logits = ops.cast(logits, "float32")
    if mask is None:
        return ops.softmax(logits, axis=axis)
    mask = ops.cast(mask, "bool")
    weights = ops.softmax(ops.where(mask, logits, FLOAT32_MIN), axis=axis)
    if zero_fully_masked:
        # A fully masked row is uniform after the softmax: the product zeroes it
        # (the other masked positions are 0 already).
        weights = weights * ops.cast(mask, "float32")
    return weights
