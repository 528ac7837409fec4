"""Additive (Bahdanau) attention and Luong's multiplicative scores."""

import math
from collections.abc import Sequence
from typing import Any

import keras
from keras import ops

from keras_selfattn.choices import SCORES
from keras_selfattn.layers.arguments import (
    check_choice,
    check_positive_int,
    check_rate,
    check_seed,
    clone_initializer,
)
from keras_selfattn.layers.dropout import HashDropout
from keras_selfattn.layers.masking import (
    check_valid_lens,
    combine_masks,
    masked_softmax,
    valid_lens_to_mask,
)


@keras.saving.register_keras_serializable(package="keras_selfattn")
class BahdanauAttention(keras.layers.Layer):
    """Attention of queries over a sequence of keys, additive or multiplicative.

    For every query ``q`` and key ``k_t`` a score ``e_t`` is computed, the scores
    over the keys are normalized with a masked softmax into weights ``a_t``, and
    the context is ``sum_t a_t v_t``. The scores:

    * ``"additive"`` (Bahdanau et al. 2015, d2l 11.3.2):
      ``e_t = w_v^T tanh(W_q q + W_k k_t)`` with ``W_q`` (Dq -> units),
      ``W_k`` (Dk -> units) and ``w_v`` (units -> 1), no biases;
    * ``"dot"`` (Luong et al. 2015): ``e_t = q . k_t`` (needs Dq == Dk);
    * ``"scaled_dot"``: ``e_t = q . k_t / sqrt(Dk)`` (needs Dq == Dk);
    * ``"general"`` (Luong et al. 2015): ``e_t = q^T W k_t`` with ``W`` (Dk -> Dq),
      the weight ``general_kernel``.

    Multi-head additive attention (``heads > 1``, RNMT+, Chen et al. 2018): the
    ``units`` features of the additive score are split into ``heads`` groups of
    ``units / heads``; group ``h`` scores with its slice of ``w_v``, so every head
    has its own weights ``a^h`` over the keys (one softmax per head), and head
    ``h`` reads its slice of the value features (``Dv / heads`` of them). The
    heads' contexts, concatenated, are the context (size ``Dv``, as with one
    head); the returned weights are the heads' mean. ``heads=1`` is the
    single-head score above, weight for weight.

    The key side of every score is a projection of the keys alone (``W_k k``,
    ``W k`` or ``k`` itself), so a decoder that attends to the same keys at every
    step computes it once with ``project_keys(keys)`` and passes it back as
    ``projected_keys=``.

    Masking: ``valid_lens`` (d2l semantics, keys at positions >= valid_len get
    weight 0) and the Keras mask of ``keys`` (``Embedding(mask_zero=True)``; Keras
    passes it as ``keys_mask``) are combined with AND (see `valid_lens_to_mask`
    for lengths outside ``0 .. T``). The softmax runs in float32
    and its result is cast once to the compute dtype; a query whose keys are all
    masked gets all-zero weights and a zero context (never NaN; d2l's
    ``masked_softmax`` gives such a row uniform weights instead). Dropout is applied
    to the weights used for the context; the returned weights are the ones before
    dropout (as in ``keras.layers.MultiHeadAttention``).

    Args:
        units: positive int, the hidden size of the additive score (the width of
            ``W_q`` and ``W_k``). Required for ``score="additive"``; the other
            scores have no such hidden layer and ignore it (it may be None).
        score: one of ``"additive"`` (default), ``"dot"``, ``"general"``,
            ``"scaled_dot"``.
        dropout: float in [0, 1), dropout rate on the attention weights.
        kernel_initializer: initializer of the projection kernels.
        seed: optional int, seed of the dropout.
        heads: positive int, attention heads of the additive score (default 1);
            must divide ``units`` and the value size. Only ``score="additive"``
            has heads.
        **kwargs: base layer arguments (``name``, ``dtype`` ...).

    Call arguments:
        query: (B, Dq) for one query per sequence (one decoder step), or
            (B, S, Dq) for S queries at once.
        keys: (B, T, Dk).
        values: optional (B, T, Dv); defaults to ``keys``.
        valid_lens: optional int tensor, (B,) or, for (B, S, Dq) queries, (B, S).
        keys_mask: optional bool (B, T), True keeps a key. Filled by Keras from
            the Keras mask of ``keys``.
        projected_keys: optional result of ``project_keys(keys)``, to skip the
            key projection.
        training: bool, whether dropout is active.

    Returns:
        A tuple ``(context, weights)``: context (B, Dv) and weights (B, T) for a
        (B, Dq) query; context (B, S, Dv) and weights (B, S, T) for (B, S, Dq)
        queries. Both in the compute dtype. With ``heads > 1`` the weights are
        the mean of the heads' weights.

    Example:

    ```python
    import numpy as np
    import keras_selfattn

    attention = keras_selfattn.layers.BahdanauAttention(units=16)
    query = np.random.rand(2, 8).astype("float32")      # one decoder step
    keys = np.random.rand(2, 5, 12).astype("float32")
    context, weights = attention(query, keys, valid_lens=np.array([3, 5]))
    assert context.shape == (2, 12) and weights.shape == (2, 5)

    # In a decoding loop, project the keys once:
    projected = attention.project_keys(keys)
    context, weights = attention(query, keys, projected_keys=projected)
    ```

    References:
        - Bahdanau, Cho, Bengio, 2015. Neural Machine Translation by Jointly
          Learning to Align and Translate. https://arxiv.org/abs/1409.0473
        - Luong, Pham, Manning, 2015. Effective Approaches to Attention-based
          Neural Machine Translation. https://arxiv.org/abs/1508.04025
        - Chen et al., 2018. The Best of Both Worlds: Combining Recent Advances
          in Neural Machine Translation. https://arxiv.org/abs/1804.09849
    """

    def __init__(
        self,
        units: int | None = None,
        score: str = "additive",
        dropout: float = 0.0,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        seed: int | None = None,
        heads: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_choice("score", score, SCORES)
        heads = check_positive_int("heads", heads)
        if heads > 1 and score != "additive":
            raise ValueError(
                "heads > 1 needs score='additive'. "
                f"Received: heads={heads}, score={score!r}"
            )
        if units is not None or score == "additive":
            if units is None:
                raise ValueError(
                    "units must be a positive integer (it is required by "
                    "score='additive'). Received: units=None"
                )
            units = check_positive_int("units", units)
        if units is not None and units % heads:
            raise ValueError(
                "units must be divisible by heads. "
                f"Received: units={units}, heads={heads}"
            )
        self.units = units
        self.heads = heads
        self.score = score
        self.dropout = check_rate("dropout", dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.seed = check_seed(seed)
        self.supports_masking = True

        if score == "additive":
            self.query_dense = self._projection(units, "query_dense")
            self.key_dense = self._projection(units, "key_dense")
            self.score_dense = self._projection(1, "score_dense")
        self.dropout_layer = HashDropout(
            self.dropout, seed=self.seed, dtype=self.dtype_policy, name="dropout"
        )

    def _projection(self, units: int | None, name: str) -> Any:
        return keras.layers.Dense(
            units,
            use_bias=False,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(
        self,
        query_shape: Sequence[int | None],
        keys_shape: Sequence[int | None],
        values_shape: Sequence[int | None] | None = None,
    ) -> None:
        query_shape, keys_shape = tuple(query_shape), tuple(keys_shape)
        if len(query_shape) not in (2, 3):
            raise ValueError(
                "query must have shape (batch, query_dim) or (batch, num_queries, "
                f"query_dim). Received: query_shape={query_shape}"
            )
        if len(keys_shape) != 3:
            raise ValueError(
                "keys must have shape (batch, num_keys, key_dim). "
                f"Received: keys_shape={keys_shape}"
            )
        query_dim, key_dim = query_shape[-1], keys_shape[-1]
        if query_dim is None or key_dim is None:
            raise ValueError(
                "The last axis of query and keys must be known. Received: "
                f"query_shape={query_shape}, keys_shape={keys_shape}"
            )
        values_shape = keys_shape if values_shape is None else tuple(values_shape)
        if values_shape[-1] is not None and values_shape[-1] % self.heads:
            raise ValueError(
                f"The value size must be divisible by heads={self.heads}. "
                f"Received: values_shape={values_shape}"
            )
        if self.score == "additive":
            self.query_dense.build(query_shape)
            self.key_dense.build(keys_shape)
            self.score_dense.build(query_shape[:-1] + (self.units,))
        elif self.score == "general":
            # A weight, not a Dense sublayer: its width is the query's, known
            # only here (sublayers are created in __init__, see CONTRIBUTING.md).
            self.general_kernel = self.add_weight(
                shape=(key_dim, query_dim),
                initializer=clone_initializer(self.kernel_initializer),
                name="general_kernel",
            )
        elif query_dim != key_dim:
            raise ValueError(
                f"score={self.score!r} needs queries and keys of the same size. "
                f"Received: query_shape={query_shape}, keys_shape={keys_shape}"
            )
        self.dropout_layer.build(query_shape[:-1] + (self.heads, keys_shape[1]))

    def projected_key_size(self, query_dim: int, key_dim: int) -> int | None:
        """The feature size of ``project_keys(keys)`` for these query and key sizes.

        ``units`` (additive), ``query_dim`` (general: ``W`` maps keys to the
        queries' size) or ``key_dim`` (the dot scores use the keys as they are).
        """
        if self.score == "additive":
            return self.units
        return query_dim if self.score == "general" else key_dim

    def project_keys(self, keys: Any) -> Any:
        """The key side of the score, computed once per key sequence.

        Args:
            keys: (B, T, Dk).

        Returns:
            (B, T, units) ``W_k keys`` for ``"additive"``, (B, T, Dq) ``W keys``
            for ``"general"``, the keys themselves for ``"dot"``/``"scaled_dot"``;
            in the compute dtype. Pass it to ``call`` as ``projected_keys=``.
        """
        if not self.built:
            raise ValueError(
                f"{self.__class__.__name__} '{self.name}' is not built yet: call it "
                "once, or call build(query_shape, keys_shape), before project_keys()."
            )
        keys = ops.cast(keys, self.compute_dtype)
        if self.score == "additive":
            return self.key_dense(keys)
        if self.score == "general":
            return ops.matmul(keys, ops.cast(self.general_kernel, self.compute_dtype))
        return keys

    def _logits(self, query: Any, projected_keys: Any) -> Any:
        """(B, Dq) or (B, S, Dq) queries, projected keys (B, T, .) -> (B, S, H, T).

        ``H`` is ``heads`` (1 for every score but a multi-head additive one).

        A single (B, Dq) query is projected as a 2-D matrix product, and the score
        vector ``v`` is applied as one 2-D matrix product over the flattened
        features, not as ``Dense`` layers on rank-3 and rank-4 tensors: on
        TensorFlow those lower to ``tensordot``, whose gradient inside the
        decoder's ``while`` loop XLA cannot compile. (A 2-D product is also one
        kernel where a multiply and a sum over ``units`` are two, in the loop's
        forward and backward pass alike.)
        """
        if self.score == "additive":
            assert self.units is not None  # required by the additive score
            projected_query = self.query_dense(query)
            batch, num_keys = ops.shape(projected_keys)[0], ops.shape(projected_keys)[1]
            if len(query.shape) == 2:
                features = ops.tanh(
                    ops.expand_dims(projected_query, 1) + projected_keys
                )  # (B, T, units)
            else:
                features = ops.tanh(
                    ops.expand_dims(projected_query, 2)
                    + ops.expand_dims(projected_keys, 1)
                )  # (B, S, T, units)
            v = ops.cast(self.score_dense.kernel, features.dtype)  # (units, 1)
            num_queries = 1 if len(query.shape) == 2 else ops.shape(query)[1]
            if self.heads == 1:  # a reshape, no transpose: the decoder's hot path
                scores = ops.matmul(ops.reshape(features, (-1, self.units)), v)
                return ops.reshape(scores, (batch, num_queries, 1, num_keys))
            # head h: its slice of the features times its slice of v
            weighted = ops.reshape(features, (-1, self.units)) * ops.reshape(
                v, (1, self.units)
            )
            per_head = (-1, self.heads, self.units // self.heads)
            scores = ops.sum(ops.reshape(weighted, per_head), axis=-1)
            scores = ops.reshape(scores, (batch, num_queries, num_keys, self.heads))
            return ops.transpose(scores, (0, 1, 3, 2))
        queries = ops.expand_dims(query, 1) if len(query.shape) == 2 else query
        logits = ops.matmul(queries, ops.transpose(projected_keys, (0, 2, 1)))
        if self.score == "scaled_dot":
            logits = logits / ops.cast(
                math.sqrt(projected_keys.shape[-1]), logits.dtype
            )
        return ops.expand_dims(logits, 2)

    def call(
        self,
        query: Any,
        keys: Any,
        values: Any = None,
        valid_lens: Any = None,
        keys_mask: Any = None,
        projected_keys: Any = None,
        training: bool | None = None,
    ) -> tuple[Any, Any]:
        single_query = len(query.shape) == 2
        if values is None:
            values = keys
        if projected_keys is None:
            projected_keys = self.project_keys(keys)
        logits = self._logits(query, ops.cast(projected_keys, self.compute_dtype))

        num_keys = ops.shape(keys)[1]
        length_mask = None
        if valid_lens is not None:
            valid_lens = check_valid_lens(
                valid_lens,
                ops.shape(query)[0],
                num_queries=None if single_query else ops.shape(query)[1],
            )
            length_mask = valid_lens_to_mask(valid_lens, num_keys)
            if len(valid_lens.shape) == 1:
                length_mask = ops.expand_dims(length_mask, 1)  # (B, 1, T)
        if keys_mask is not None:
            keys_mask = ops.expand_dims(ops.cast(keys_mask, "bool"), 1)  # (B, 1, T)
        mask = combine_masks(length_mask, keys_mask)
        if mask is not None:
            mask = ops.expand_dims(mask, 2)  # (B, S or 1, 1, T): every head

        # float32 softmax; a query with every key masked gets zero weights (and a
        # zero context).
        weights = masked_softmax(logits, mask)
        weights = ops.cast(weights, self.compute_dtype)  # (B, S, H, T)
        dropped = self.dropout_layer(weights, training=training)
        context = self._context(dropped, ops.cast(values, self.compute_dtype))
        weights = ops.squeeze(weights, 2) if self.heads == 1 else ops.mean(weights, 2)
        if single_query:
            context = ops.squeeze(context, 1)
            weights = ops.squeeze(weights, 1)
        return context, weights

    def _context(self, weights: Any, values: Any) -> Any:
        """Weights (B, S, H, T) and values (B, T, Dv) -> context (B, S, Dv)."""
        if self.heads == 1:
            return ops.matmul(ops.squeeze(weights, 2), values)
        batch, num_keys = ops.shape(values)[0], ops.shape(values)[1]
        head_dim = values.shape[-1] // self.heads
        values = ops.reshape(values, (batch, num_keys, self.heads, head_dim))
        context = ops.matmul(
            ops.transpose(weights, (0, 2, 1, 3)),  # (B, H, S, T)
            ops.transpose(values, (0, 2, 1, 3)),  # (B, H, T, Dv / H)
        )  # (B, H, S, Dv / H)
        context = ops.transpose(context, (0, 2, 1, 3))
        num_queries = weights.shape[1]  # static when known (1 for a single query)
        if num_queries is None:
            num_queries = ops.shape(weights)[1]
        return ops.reshape(context, (batch, num_queries, self.heads * head_dim))

    def compute_output_shape(
        self,
        query_shape: Sequence[int | None],
        keys_shape: Sequence[int | None],
        values_shape: Sequence[int | None] | None = None,
    ) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
        query_shape, keys_shape = tuple(query_shape), tuple(keys_shape)
        value_dim = (values_shape if values_shape is not None else keys_shape)[-1]
        return query_shape[:-1] + (value_dim,), query_shape[:-1] + (keys_shape[1],)

    def compute_output_spec(
        self,
        query: Any,
        keys: Any,
        values: Any = None,
        valid_lens: Any = None,
        keys_mask: Any = None,
        projected_keys: Any = None,
        training: bool | None = None,
    ) -> tuple[Any, Any]:
        context_shape, weights_shape = self.compute_output_shape(
            query.shape, keys.shape, None if values is None else values.shape
        )
        return (
            keras.KerasTensor(context_shape, dtype=self.compute_dtype),
            keras.KerasTensor(weights_shape, dtype=self.compute_dtype),
        )

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "score": self.score,
                "heads": self.heads,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "seed": self.seed,
            }
        )
        return config
