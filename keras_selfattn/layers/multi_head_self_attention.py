"""Multi-head scaled dot-product self-attention with d2l valid-length masking,
and optional relative (Shaw et al. 2018) or rotary (Su et al. 2021) positions."""

import math
from collections.abc import Sequence
from typing import Any

import keras
from keras import ops

from keras_selfattn.layers.arguments import (
    check_positive_int,
    check_positive_number,
    check_rate,
    check_seed,
    clone_initializer,
)
from keras_selfattn.layers.dropout import HashDropout
from keras_selfattn.layers.masking import (
    causal_mask,
    check_valid_lens,
    combine_masks,
    keeps_a_key,
    masked_softmax,
    valid_lens_to_mask,
)
from keras_selfattn.layers.relative_positions import (
    relative_position_indices,
    rotary_embedding,
)

# Backends whose keras.ops.dot_product_attention is a fused kernel (see
# `MultiHeadSelfAttention._fused_attention_applies`).
_FUSED_ATTENTION_BACKENDS = frozenset({"jax", "torch"})


def _check_head_options(
    num_hiddens: int,
    num_heads: int,
    use_rotary: bool,
    max_relative_position: int | None,
) -> None:
    """The options that must agree with each other (Keras' error form)."""
    if num_hiddens % num_heads:
        raise ValueError(
            "num_hiddens must be divisible by num_heads. "
            f"Received: num_hiddens={num_hiddens}, num_heads={num_heads}"
        )
    if use_rotary and (num_hiddens // num_heads) % 2:
        raise ValueError(
            "use_rotary=True needs an even head size (num_hiddens // num_heads). "
            f"Received: num_hiddens={num_hiddens}, num_heads={num_heads}"
        )
    if use_rotary and max_relative_position is not None:
        raise ValueError(
            "Choose one of use_rotary and max_relative_position. "
            f"Received: use_rotary={use_rotary}, "
            f"max_relative_position={max_relative_position}"
        )


def _checked_attention_mask(attention_mask: Any, batch: Any, length: Any) -> Any:
    """The mask as bool (B, T, T), its sizes known at the call checked."""
    attention_mask = ops.convert_to_tensor(attention_mask)
    shape = tuple(attention_mask.shape)
    expected = tuple(d if isinstance(d, int) else None for d in (batch, length, length))
    if len(shape) != 3 or any(
        got is not None and want is not None and got != want
        for got, want in zip(shape, expected)
    ):
        raise ValueError(
            "attention_mask must have shape (batch, T, T) = "
            f"{tuple('?' if d is None else d for d in expected)}. "
            f"Received: attention_mask.shape={shape}"
        )
    # Sizes known only at run time broadcast as in `check_valid_lens`.
    return ops.cast(attention_mask, "bool")


@keras.saving.register_keras_serializable(package="keras_selfattn")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention (Vaswani et al. 2017).

    Queries, keys and values are learned projections of the same sequence ``X``,
    computed by one fused ``(d_in, 3 * num_hiddens)`` projection and split into
    ``num_heads`` heads of size ``num_hiddens // num_heads``. Each head computes
    ``softmax(Q K^T / sqrt(head_size)) V``; the heads are concatenated and projected
    back to ``num_hiddens`` (d2l section 11.5).

    Masking follows Dive into Deep Learning (with one difference, below):
    ``valid_lens`` of shape ``(B,)`` hides
    keys at positions ``>= valid_len`` from every query; ``(B, T)`` gives each query
    its own length. The Keras mask of ``X`` (from ``Embedding(mask_zero=True)``) hides
    the same keys, an explicit boolean ``attention_mask`` ``(B, T, T)`` hides any
    (query, key) pair, and ``use_causal_mask`` hides future keys; all given masks are
    combined with AND. The logits (formed in float32 under a float16 policy, whose
    range ends at 65504) and the softmax are float32, with masked logits replaced
    by the float32 minimum, so nothing overflows; a query whose keys are all
    hidden gets all-zero weights (its output is the output projection's bias) rather
    than NaN. That is where the book differs: its ``masked_softmax`` fills with
    -1e6, so a row with ``valid_len`` 0 gets uniform weights there, and zeros
    here. The Keras mask passes through to the output.

    Positions: by itself the layer is blind to order (permuting ``X`` permutes the
    output). Two options let it see offsets ``j - i`` between query ``i`` and key
    ``j`` instead of absolute positions; without them the layer has no further
    weights and computes exactly the plain attention above.

    * ``max_relative_position=k``: relative position representations (Shaw et al.
      2018). Two learned tables, ``relative_key`` and ``relative_value``, of shape
      ``(2k + 1, head_size)`` and shared by the heads, hold one embedding per
      clipped offset ``clip(j - i, -k, k)``; each head computes
      ``e_ij = q_i (k_j + a^K_ij)^T / sqrt(head_size)`` and
      ``z_i = sum_j alpha_ij (v_j + a^V_ij)``.
    * ``use_rotary=True``: rotary position embeddings (RoPE, Su et al. 2021).
      Feature pair ``(2m, 2m + 1)`` of the query and key at position ``p`` is
      rotated by the angle ``p * rotary_max_wavelength^(-2m / head_size)``, so
      ``q_i k_j^T`` depends on the positions only through ``j - i``. No weights.
      The pairs are interleaved (features ``2m`` and ``2m + 1``, as in RoFormer);
      keras-hub's ``RotaryEmbedding`` pairs feature ``m`` with ``m + D/2``
      (half-split). Both are RoPE, but they rotate different feature pairs, so
      weights trained with one are not interchangeable with the other.

    With either, shifting every position by a constant leaves the output
    unchanged. Both work with every mask above, float16 and XLA.

    Args:
        num_hiddens: int, width of the projections and of the output; divisible by
            ``num_heads``.
        num_heads: int, number of attention heads.
        dropout: float in [0, 1), dropout rate on the attention weights.
        use_bias: bool, whether the projections have biases (d2l: False).
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.
        seed: optional int, seed of the attention dropout.
        max_relative_position: optional positive int ``k``; adds relative position
            representations for offsets ``-k .. k`` (larger offsets share the edge
            embeddings). None (default): no relative positions, no extra weights.
        relative_initializer: initializer of the ``relative_key`` and
            ``relative_value`` tables (random by default, not zero, so the tables
            start apart); used only with ``max_relative_position``.
        use_rotary: bool, rotate queries and keys by position (RoPE). Needs an even
            head size; not combined with ``max_relative_position``.
        rotary_max_wavelength: positive float, the base of the rotary frequencies
            (10000 as in the sinusoidal table and RoFormer).
        **kwargs: base layer arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: float tensor ``X`` of shape ``(B, T, d_in)``.
        valid_lens: optional int tensor ``(B,)`` or ``(B, T)``. A batch or
            length that differs from the inputs' (``(1,)`` for a batch of 2
            too: no broadcasting) raises ValueError when the shapes are known
            at the call; known only at run time (a ``tf.function`` traced with
            an unknown batch) they broadcast as NumPy does (see
            `check_valid_lens`). Values are compared in their own dtype (see
            `valid_lens_to_mask`): a length >= T keeps every key (also int64
            2**33, which a cast to int32 would wrap to 0); a length <= 0, or a
            float NaN, hides every key, so the query gets zero weights.
        attention_mask: optional boolean tensor ``(B, T, T)``, True where a query
            may attend to a key; other shapes are refused like ``valid_lens``.
        use_causal_mask: bool, hide keys after the query (decoder self-attention).
        return_attention_scores: bool, also return the attention weights.
        training: bool, whether dropout is active.
        mask: the Keras mask of ``inputs``, filled by Keras (named ``inputs_mask``
            when another tensor such as ``valid_lens`` is passed too).

    Returns:
        ``(B, T, num_hiddens)`` in the compute dtype, and with
        ``return_attention_scores=True`` also the weights ``(B, num_heads, T, T)``.

    The options are plain attributes under their argument names, as in
    ``keras.layers.MultiHeadAttention``, and ``get_config`` lists them all. The
    sublayers and weights are made from them at construction, so to change one
    make a new layer: ``from_config({**layer.get_config(), "num_heads": 3})``.

    Subclassing: `call` is `project_query_key_value` -> `compute_attention_mask`
    -> `compute_attention` (`attention_logits` -> `attention_weights` ->
    `attend`, then zeros for queries with no key) -> the output projection.
    Override one step to change it alone, e.g. `attention_logits` for another
    score or `compute_attention_mask` for another mask. On JAX and torch,
    where the three steps are the layer's own and nothing needs them apart (no
    returned weights, no relative positions, no attention dropout in training,
    no float16 policy), `compute_attention` runs them as one
    `keras.ops.dot_product_attention` (`fused_attention`) instead: the same
    logits, mask and zeros, in the backend's fused kernel (JAX on a GPU:
    cuDNN). On TensorFlow that op has no fused kernel and measured slower, so
    the three steps run there.

    Example:

    >>> import numpy as np, keras_selfattn
    >>> attn = keras_selfattn.layers.MultiHeadSelfAttention(
    ...     num_hiddens=100, num_heads=5)
    >>> X = np.ones((2, 4, 100), "float32")
    >>> Y, W = attn(X, valid_lens=np.array([3, 2]), return_attention_scores=True)
    >>> tuple(Y.shape), tuple(W.shape)
    ((2, 4, 100), (2, 5, 4, 4))
    >>> relative = keras_selfattn.layers.MultiHeadSelfAttention(
    ...     16, 2, max_relative_position=4)
    >>> Y = relative(np.ones((2, 5, 16), "float32"))
    >>> tuple(Y.shape), tuple(relative.relative_key.shape)
    ((2, 5, 16), (9, 8))

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.2.
        Zhang et al., "Dive into Deep Learning", sections 11.3 and 11.5.
        Shaw et al. 2018, "Self-Attention with Relative Position Representations".
        Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position
        Embedding".
    """

    def __init__(
        self,
        num_hiddens: int,
        num_heads: int,
        dropout: float = 0.0,
        use_bias: bool = False,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        bias_initializer: str | keras.initializers.Initializer = "zeros",
        seed: int | None = None,
        max_relative_position: int | None = None,
        relative_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        use_rotary: bool = False,
        rotary_max_wavelength: float = 10000.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_hiddens = check_positive_int("num_hiddens", num_hiddens)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.dropout = check_rate("dropout", dropout)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = check_seed(seed)
        self.max_relative_position = check_positive_int(
            "max_relative_position", max_relative_position, allow_none=True
        )
        self.relative_initializer = keras.initializers.get(relative_initializer)
        self.use_rotary = bool(use_rotary)
        self.rotary_max_wavelength = check_positive_number(
            "rotary_max_wavelength", rotary_max_wavelength
        )
        _check_head_options(
            self.num_hiddens,
            self.num_heads,
            self.use_rotary,
            self.max_relative_position,
        )
        self.supports_masking = True
        self._create_sublayers()

    def _create_sublayers(self) -> None:
        def dense_kwargs() -> dict[str, Any]:
            # A fresh initializer object per sublayer: a Keras initializer without
            # an explicit seed draws its seed once, so sharing one instance would
            # give the output kernel a rescaled copy of the Q/K/V kernel's values.
            return {
                "use_bias": self.use_bias,
                "kernel_initializer": clone_initializer(self.kernel_initializer),
                "bias_initializer": clone_initializer(self.bias_initializer),
                "dtype": self.dtype_policy,
            }

        self.query_key_value_dense = keras.layers.Dense(
            3 * self.num_hiddens, name="query_key_value", **dense_kwargs()
        )
        self.output_dense = keras.layers.Dense(
            self.num_hiddens, name="output", **dense_kwargs()
        )
        self.dropout_layer = HashDropout(
            self.dropout,
            seed=self.seed,
            dtype=self.dtype_policy,
            name="attention_dropout",
        )

    @property
    def head_size(self) -> int:
        """Width of one head, ``num_hiddens // num_heads``."""
        return self.num_hiddens // self.num_heads

    def build(self, inputs_shape: Sequence[int | None]) -> None:
        if len(inputs_shape) != 3:
            raise ValueError(
                "MultiHeadSelfAttention expects inputs of shape (batch, T, features). "
                f"Received: inputs.shape={tuple(inputs_shape)}"
            )
        self.query_key_value_dense.build(inputs_shape)
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.num_hiddens,))
        self.dropout_layer.build((None, self.num_heads, None, None))
        if self.max_relative_position is not None:
            # Only with the option: plain layers keep exactly their old weights.
            rows = 2 * self.max_relative_position + 1
            self.relative_key = self.add_weight(
                shape=(rows, self.head_size),
                initializer=clone_initializer(self.relative_initializer),
                name="relative_key",
            )
            self.relative_value = self.add_weight(
                shape=(rows, self.head_size),
                initializer=clone_initializer(self.relative_initializer, seed_offset=1),
                name="relative_value",
            )
        self.built = True

    def call(
        self,
        inputs: Any,
        valid_lens: Any = None,
        attention_mask: Any = None,
        use_causal_mask: bool = False,
        return_attention_scores: bool = False,
        training: bool | None = None,
        mask: Any = None,
        inputs_mask: Any = None,
    ) -> Any:
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        query, key, value = self.project_query_key_value(inputs)
        key_mask = self.compute_attention_mask(
            inputs,
            valid_lens=valid_lens,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            mask=mask if mask is not None else inputs_mask,
        )
        context, weights = self.compute_attention(
            query,
            key,
            value,
            key_mask,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        context = ops.reshape(context, (batch, length, self.num_hiddens))
        outputs = self.output_dense(context)
        if return_attention_scores:
            return outputs, weights
        return outputs

    # The steps of `call`, each one overridable (as keras' MultiHeadAttention
    # exposes `_compute_attention_mask` and `_compute_attention`).

    def project_query_key_value(self, inputs: Any) -> tuple[Any, Any, Any]:
        """``(B, T, d_in)`` -> query, key, value, each ``(B, T, num_heads, head_size)``.

        One fused projection, split per head.
        """
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        qkv = self.query_key_value_dense(inputs)
        qkv = ops.reshape(qkv, (batch, length, 3, self.num_heads, self.head_size))
        # unstack, not three strided slices qkv[:, :, i]: on TensorFlow without XLA
        # the gradient of each slice is a zero-padded tensor of qkv's full size,
        # the gradient of unstack is one stack (about 25% of a training step at
        # length 128; benchmarks/RESULTS.md, "What the profile found").
        query, key, value = ops.unstack(qkv, num=3, axis=2)
        return query, key, value

    def compute_attention_mask(
        self,
        inputs: Any,
        valid_lens: Any = None,
        attention_mask: Any = None,
        use_causal_mask: bool = False,
        mask: Any = None,
    ) -> Any:
        """Every mask source combined (AND) into one boolean key mask, or None.

        Args:
            inputs: the layer's input ``(B, T, d_in)``; the masks are checked
                against its batch and length.
            valid_lens: as in the call.
            attention_mask: as in the call.
            use_causal_mask: as in the call.
            mask: the Keras mask of ``inputs``.

        Returns:
            bool, True where a query may attend to a key, of shape
            ``(B or 1, 1, Tq or 1, Tk)`` (broadcast over the heads), or None when
            no mask is given.
        """
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        masks = []
        if valid_lens is not None:
            valid_lens = check_valid_lens(valid_lens, batch, num_queries=length)
            lens_mask = valid_lens_to_mask(valid_lens, length)  # (B, Tk) or (B, Tq, Tk)
            if len(lens_mask.shape) == 2:
                lens_mask = ops.expand_dims(lens_mask, 1)
            masks.append(ops.expand_dims(lens_mask, 1))
        if mask is not None:
            masks.append(ops.reshape(ops.cast(mask, "bool"), (-1, 1, 1, length)))
        if attention_mask is not None:
            attention_mask = _checked_attention_mask(attention_mask, batch, length)
            masks.append(ops.expand_dims(attention_mask, 1))
        if use_causal_mask:
            masks.append(causal_mask(length, length)[None, None])
        return combine_masks(*masks)

    def compute_attention(
        self,
        query: Any,
        key: Any,
        value: Any,
        attention_mask: Any = None,
        training: bool | None = None,
        return_attention_scores: bool = False,
    ) -> tuple[Any, Any]:
        """Attention of the heads: logits, weights, their average of the values.

        Runs `attention_logits`, `attention_weights` and `attend`, or
        `fused_attention` where that applies (see `_fused_attention_applies`),
        then gives a query whose keys are all hidden zeros (`keeps_a_key`,
        computed once): zero context, and zero weights when they are returned.
        Zeroing the (B, T, H, D) context costs less than a pass over the
        (B, H, T, T) weights before `attend`, which only returned weights get.

        Args:
            query: ``(B, T, num_heads, head_size)``.
            key: ``(B, T, num_heads, head_size)``.
            value: ``(B, T, num_heads, head_size)``.
            attention_mask: bool key mask from `compute_attention_mask`, or None.
            training: whether dropout is active.
            return_attention_scores: whether the weights are returned.

        Returns:
            ``(context, weights)``: context ``(B, Tq, num_heads, head_size)``;
            weights ``(B, num_heads, Tq, Tk)`` in the compute dtype, or None
            unless ``return_attention_scores``.
        """
        weights: Any  # None on the fused path, which never returns the weights
        if self._fused_attention_applies(return_attention_scores, training):
            context = self.fused_attention(query, key, value, attention_mask)
            weights = None
        else:
            logits = self.attention_logits(query, key)
            weights = self.attention_weights(logits, attention_mask)
            context = self.attend(weights, value, training=training)
        kept = keeps_a_key(attention_mask)  # (B|1, 1, Tq|1, 1) or None
        if kept is not None:
            context = context * ops.cast(
                ops.transpose(kept, (0, 2, 1, 3)), context.dtype
            )
        if not return_attention_scores:
            return context, None
        if kept is not None:
            weights = weights * ops.cast(kept, weights.dtype)
        return context, weights

    def _fused_attention_applies(
        self, return_attention_scores: bool, training: bool | None
    ) -> bool:
        """Whether `fused_attention` runs instead of the three steps.

        Only on a backend whose ``dot_product_attention`` has a fused kernel
        (JAX: ``jax.nn.dot_product_attention``, cuDNN on a GPU; torch:
        ``scaled_dot_product_attention``). Not on TensorFlow: there keras'
        op is the same einsum-softmax-einsum with the scale and the mask as
        extra passes over the (B, H, T, S) logits, and it measured slower
        than the three steps (benchmarks/attention_vs_keras.py). Nor when
        the weights are returned, with relative positions (their terms enter
        the logits and the context), with attention dropout in training
        (``dot_product_attention`` has no dropout on the weights; keras'
        MultiHeadAttention falls back in the same case), under a float16
        policy (``dot_product_attention`` forms the logits in float16, which
        overflows where ours are float32), nor when a subclass overrides one
        of the steps (its step must run).
        """
        if keras.backend.backend() not in _FUSED_ATTENTION_BACKENDS:
            return False
        if return_attention_scores or self.max_relative_position is not None:
            return False
        if self.dropout > 0 and training is not None and training is not False:
            return False
        if self.compute_dtype == "float16":
            return False
        own = MultiHeadSelfAttention
        return all(
            getattr(type(self), step) is getattr(own, step)
            for step in ("attention_logits", "attention_weights", "attend")
        )

    def fused_attention(
        self, query: Any, key: Any, value: Any, attention_mask: Any = None
    ) -> Any:
        """The attention of the heads in one ``keras.ops.dot_product_attention``.

        The query is scaled by ``1 / sqrt(head_size)`` (and rotated with
        ``use_rotary``) first, as in `attention_logits`, and the kernel's own
        scale is 1, so the logits are those of the three-step path. On JAX the
        op is ``jax.nn.dot_product_attention``: XLA's einsum-softmax-einsum on
        a CPU, cuDNN's fused kernel on a GPU where keras finds the shapes and
        dtype allow it (``flash_attention=None``: keras decides); on torch,
        ``scaled_dot_product_attention``. A query whose keys are all hidden
        gets the uniform average of the values from the op (its logits are
        all the same fill); `compute_attention` zeroes it.

        On JAX the mask goes to the op as ``(B, 1, Tq, Tk)``: cuDNN takes a
        mask only with both lengths spelled out, and refuses the
        ``(B, 1, 1, Tk)`` key mask of a padded batch ("Bias must have same seq
        length as QKV"), after which keras runs XLA's unfused attention and
        logs the refusal at every trace: spelled out, the mask keeps the fused
        kernel (benchmarks/RESULTS.md, "The attention on a GPU (H200), JAX and
        torch", has the measurement).

        Args:
            query: ``(B, T, num_heads, head_size)``.
            key: ``(B, T, num_heads, head_size)``.
            value: ``(B, T, num_heads, head_size)``.
            attention_mask: bool key mask ``(B|1, 1, Tq|1, Tk)``, or None.

        Returns:
            The context ``(B, Tq, num_heads, head_size)``.
        """
        query = query * ops.cast(1.0 / math.sqrt(self.head_size), query.dtype)
        if self.use_rotary:
            query = rotary_embedding(query, self.rotary_max_wavelength)
            key = rotary_embedding(key, self.rotary_max_wavelength)
        if attention_mask is not None and keras.backend.backend() == "jax":
            attention_mask = ops.broadcast_to(
                attention_mask,
                (ops.shape(query)[0], 1, ops.shape(query)[1], ops.shape(key)[1]),
            )
        return ops.dot_product_attention(
            query, key, value, mask=attention_mask, scale=1.0
        )

    def attention_logits(self, query: Any, key: Any) -> Any:
        """float32 logits ``(B, num_heads, Tq, Tk)``: ``q k^T / sqrt(head_size)``.

        With ``use_rotary`` the query and key are rotated first; with
        ``max_relative_position`` the relative key term is added (Shaw et al.).
        Formed in float32 under a float16 policy (whose range ends at 65504).
        """
        query = query * ops.cast(1.0 / math.sqrt(self.head_size), query.dtype)
        if self.compute_dtype == "float16":
            # float16 tops out at 65504: a few large activations overflow Q K^T to
            # inf, and softmax(inf) is NaN. Form the logits in float32 instead.
            query, key = ops.cast(query, "float32"), ops.cast(key, "float32")
        if self.use_rotary:
            # Angles and rotation in float32, cast back to the query/key dtype.
            query = rotary_embedding(query, self.rotary_max_wavelength)
            key = rotary_embedding(key, self.rotary_max_wavelength)
        logits = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32")
        if self.max_relative_position is not None:
            # Shaw et al. eq. 5: the extra term q_i a^K_ij / sqrt(d), a^K gathered
            # per (i, j) from the clipped offset j - i.
            relative_keys = ops.take(
                ops.cast(self.relative_key, query.dtype),
                relative_position_indices(
                    ops.shape(query)[1], ops.shape(key)[1], self.max_relative_position
                ),
                axis=0,
            )
            logits = logits + ops.cast(
                ops.einsum("bqhd,qkd->bhqk", query, relative_keys), "float32"
            )
        return logits

    def attention_weights(self, logits: Any, attention_mask: Any = None) -> Any:
        """Softmax over the keys, hidden keys at weight 0, in the compute dtype.

        A row whose keys are all hidden is left uniform here; `compute_attention`
        zeroes what it produces.
        """
        return ops.cast(
            masked_softmax(logits, attention_mask, zero_fully_masked=False),
            self.compute_dtype,
        )

    def attend(self, weights: Any, value: Any, training: bool | None = None) -> Any:
        """Dropout on the weights, then their average of the values.

        Returns the context ``(B, Tq, num_heads, head_size)``; with
        ``max_relative_position`` the relative value term is added (Shaw et al.).
        """
        dropped = self.dropout_layer(weights, training=training)
        context = ops.einsum("bhqk,bkhd->bqhd", dropped, value)
        if self.max_relative_position is not None:
            # Shaw et al. eq. 3: the extra term sum_j alpha_ij a^V_ij.
            relative_values = ops.take(
                ops.cast(self.relative_value, dropped.dtype),
                relative_position_indices(
                    ops.shape(weights)[2],
                    ops.shape(value)[1],
                    self.max_relative_position,
                ),
                axis=0,
            )
            context = context + ops.einsum("bhqk,qkd->bqhd", dropped, relative_values)
        return context

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return mask

    def compute_output_shape(
        self, inputs_shape: Sequence[int | None]
    ) -> tuple[int | None, ...]:
        return tuple(inputs_shape[:-1]) + (self.num_hiddens,)

    def compute_output_spec(
        self, inputs: Any, return_attention_scores: bool = False, **kwargs: Any
    ) -> Any:
        shape = self.compute_output_shape(inputs.shape)
        outputs = keras.KerasTensor(shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        batch, length = inputs.shape[0], inputs.shape[1]
        weights = keras.KerasTensor(
            (batch, self.num_heads, length, length), dtype=self.compute_dtype
        )
        return outputs, weights

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "num_hiddens": self.num_hiddens,
                "num_heads": self.num_heads,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
                "max_relative_position": self.max_relative_position,
                "relative_initializer": keras.initializers.serialize(
                    self.relative_initializer
                ),
                "use_rotary": self.use_rotary,
                "rotary_max_wavelength": self.rotary_max_wavelength,
            }
        )
        return config
