"""The building blocks `build_seq2seq` composes (serializable, keras.ops only)."""

import math

import keras
from keras import ops

from keras_selfattn.decoding.once import held, holding
from keras_selfattn.layers import MultiHeadSelfAttention
from keras_selfattn.layers.arguments import check_positive_int, check_rate, check_seed
from keras_selfattn.layers.dropout import HashDropout


@keras.saving.register_keras_serializable(package="keras_selfattn")
class ScaledTokenEmbedding(keras.layers.Layer):
    """Token embedding multiplied by sqrt(width), with id 0 as padding (masked).

    The scaling keeps the embedding on the scale of the sinusoidal table added next
    (Vaswani et al. 2017, section 3.4; d2l 11.7).

    Args:
        vocab_size: int, number of token ids.
        output_dim: int, the embedding width.
        **kwargs: base layer arguments.
    """

    def __init__(self, vocab_size, output_dim, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.output_dim = check_positive_int("output_dim", output_dim)
        self.embedding = keras.layers.Embedding(
            vocab_size,
            output_dim,
            mask_zero=True,
            dtype=self.dtype_policy,
            name="embedding",
        )

    def build(self, ids_shape):
        self.embedding.build(ids_shape)
        self.built = True

    def call(self, ids):
        return self.embedding(ids) * ops.cast(
            math.sqrt(self.output_dim), self.compute_dtype
        )

    def compute_mask(self, ids, mask=None):
        return ops.not_equal(ids, 0)

    def compute_output_shape(self, ids_shape):
        return tuple(ids_shape) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "output_dim": self.output_dim})
        return config


@keras.saving.register_keras_serializable(package="keras_selfattn")
class TiedEmbedding(keras.layers.Layer):
    """A target embedding that is also the output layer (tied weights).

    Called on token ids it looks them up, ``E[ids]`` (id 0 is padding and gives
    a Keras mask); called with ``reverse=True`` on vectors ``h`` (B, ..., D) it
    gives the float32 logits ``h E^T + b`` over the vocabulary. One matrix
    serves both ends of the decoder (Press & Wolf 2017; Inan et al. 2017), so a
    rare token's output row learns from its input uses too, and the vocabulary
    matrix is stored once.

    Args:
        vocab_size: int, number of token ids.
        output_dim: int, the embedding width; the vectors given to the reverse
            call must have this size.
        **kwargs: base layer arguments.

    References:
        - Press & Wolf, 2017. Using the Output Embedding to Improve Language
          Models. https://arxiv.org/abs/1608.05859
    """

    def __init__(self, vocab_size, output_dim, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.output_dim = check_positive_int("output_dim", output_dim)
        self.supports_masking = True

    def build(self, inputs_shape=None):
        self.embeddings = self.add_weight(
            shape=(self.vocab_size, self.output_dim),
            initializer="uniform",  # keras.layers.Embedding's
            name="embeddings",
        )
        self.bias = self.add_weight(
            shape=(self.vocab_size,), initializer="zeros", name="bias"
        )
        self.built = True

    def call(self, inputs, reverse=False):
        if not reverse:
            return ops.take(
                ops.cast(self.embeddings, self.compute_dtype),
                ops.cast(inputs, "int32"),
                axis=0,
            )
        if inputs.shape[-1] != self.output_dim:
            raise ValueError(
                f"reverse=True needs vectors of size output_dim={self.output_dim}. "
                f"Received: inputs.shape={tuple(inputs.shape)}"
            )
        logits = ops.matmul(ops.cast(inputs, "float32"), self.output_kernel())
        return logits + ops.cast(self.bias, "float32")

    def output_kernel(self):
        """float32 (output_dim, vocab_size): ``E^T``, what the reverse call
        multiplies by; inside `output_kernel_held`, the one computed there.

        ``E`` is read in the layer's compute dtype, as the lookup reads it (and
        as Keras' autocast gives it inside a call under a mixed policy), so the
        kernel is the same whether it is computed inside a call or before a
        loop."""
        kernel = held(self, "output_kernel")
        if kernel is not None:
            return kernel
        embeddings = ops.cast(self.embeddings, self.compute_dtype)
        return ops.transpose(ops.cast(embeddings, "float32"))

    def output_kernel_held(self):
        """Computes ``E^T`` once, here; inside, the reverse call multiplies by it.

        A TensorFlow decoding loop enters this before its loop, so the
        transposed matrix is a loop invariant stored as the product wants it.
        Computed inside the loop, the transpose is folded by Grappler into the
        product (``MatMul(transpose_b=True)``), which oneDNN runs slower than
        the same product by the transposed matrix at the 8-32 rows of a
        decoder step (benchmarks/RESULTS.md, "the tied output's `E^T`
        held before the loop"); and the product by ``E^T`` is the largest of a
        step. Held as every value a loop computes once
        (`keras_selfattn.decoding.once.holding`).
        """
        return holding([(self, "output_kernel", self.output_kernel())])

    def compute_mask(self, inputs, mask=None):
        # Token ids are masked at padding; the reverse call's vectors are not.
        if "int" in str(getattr(inputs, "dtype", "")):
            return ops.not_equal(inputs, 0)
        return None

    def compute_output_spec(self, inputs, reverse=False):
        if reverse:
            shape = tuple(inputs.shape)[:-1] + (self.vocab_size,)
            return keras.KerasTensor(shape, dtype="float32")
        shape = tuple(inputs.shape) + (self.output_dim,)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "output_dim": self.output_dim})
        return config


@keras.saving.register_keras_serializable(package="keras_selfattn")
class TransformerEncoderBlock(keras.layers.Layer):
    """Self-attention, then a position-wise feed-forward network, each with a residual.

    Post-layer-norm (``norm_first=False``, the original Transformer and d2l 11.7):
    ``y = LN(x + Drop(MHSA(x)))``, ``out = LN(y + Drop(FFN(y)))``. Pre-layer-norm
    (``norm_first=True``): ``y = x + Drop(MHSA(LN(x)))``,
    ``out = y + Drop(FFN(LN(y)))``.
    Padding keys are hidden through the Keras mask, which passes through.

    Args:
        num_hiddens: int, width of the residual stream.
        num_heads: int, attention heads.
        ffn_hiddens: int, hidden width of the feed-forward network.
        dropout: float, dropout rate on attention weights and both sublayer outputs.
        norm_first: bool, pre- (True) or post- (False) layer normalization.
        seed: optional int, seed of the dropouts.
        max_relative_position: optional int; when set, the self-attention uses
            relative position representations clipped at this offset (Shaw et al.
            2018; see `MultiHeadSelfAttention`).
        use_rotary: bool, rotary position embeddings on queries and keys.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: (B, T, num_hiddens).
        training: bool, whether dropout is active.
        mask: the Keras mask of ``inputs`` (filled by Keras).
        return_attention_scores: bool, also return the self-attention weights
            (B, num_heads, T, T).
    """

    def __init__(
        self,
        num_hiddens,
        num_heads,
        ffn_hiddens,
        dropout=0.0,
        norm_first=False,
        seed=None,
        max_relative_position=None,
        use_rotary=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_hiddens = check_positive_int("num_hiddens", num_hiddens)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.ffn_hiddens = check_positive_int("ffn_hiddens", ffn_hiddens)
        self.dropout = check_rate("dropout", dropout)
        self.norm_first = bool(norm_first)
        self.seed = check_seed(seed)
        self.max_relative_position = max_relative_position
        self.use_rotary = use_rotary
        self.supports_masking = True
        policy = self.dtype_policy
        self.attention = MultiHeadSelfAttention(
            num_hiddens,
            num_heads,
            dropout=dropout,
            seed=seed,
            dtype=policy,
            name="attention",
            max_relative_position=max_relative_position,
            use_rotary=use_rotary,
        )
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=1e-5, dtype=policy, name="attention_norm"
        )
        self.ffn_inner = keras.layers.Dense(
            ffn_hiddens, activation="relu", dtype=policy, name="ffn_inner"
        )
        self.ffn_outer = keras.layers.Dense(num_hiddens, dtype=policy, name="ffn_outer")
        self.ffn_norm = keras.layers.LayerNormalization(
            epsilon=1e-5, dtype=policy, name="ffn_norm"
        )
        self.dropout_layer = HashDropout(
            dropout, seed=seed, dtype=policy, name="dropout"
        )

    def build(self, inputs_shape):
        self.attention.build(inputs_shape)
        self.attention_norm.build(inputs_shape)
        self.ffn_inner.build(inputs_shape)
        self.ffn_outer.build(tuple(inputs_shape[:-1]) + (self.ffn_hiddens,))
        self.ffn_norm.build(inputs_shape)
        self.dropout_layer.build(inputs_shape)
        self.built = True

    def call(self, inputs, training=None, mask=None, return_attention_scores=False):
        scores = []

        def attend(x):
            out = self.attention(
                x,
                mask=mask,
                training=training,
                return_attention_scores=return_attention_scores,
            )
            if return_attention_scores:
                out, weights = out
                scores.append(weights)
            return self.dropout_layer(out, training=training)

        def feed_forward(x):
            return self.dropout_layer(
                self.ffn_outer(self.ffn_inner(x)), training=training
            )

        if self.norm_first:
            y = inputs + attend(self.attention_norm(inputs))
            outputs = y + feed_forward(self.ffn_norm(y))
        else:
            y = self.attention_norm(inputs + attend(inputs))
            outputs = self.ffn_norm(y + feed_forward(y))
        return (outputs, scores[0]) if return_attention_scores else outputs

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def compute_output_spec(self, inputs, return_attention_scores=False, **kwargs):
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        batch, length = inputs.shape[0], inputs.shape[1]
        return outputs, keras.KerasTensor(
            (batch, self.num_heads, length, length), dtype=self.compute_dtype
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_hiddens": self.num_hiddens,
                "num_heads": self.num_heads,
                "ffn_hiddens": self.ffn_hiddens,
                "dropout": self.dropout,
                "norm_first": self.norm_first,
                "seed": self.seed,
                "max_relative_position": self.max_relative_position,
                "use_rotary": self.use_rotary,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_selfattn")
class DeepOutput(keras.layers.Layer):
    """A hidden layer between the decoder's output and the output layer.

    Bahdanau et al. (2015) read each target word off a "deep output"
    (Pascanu et al. 2014): a hidden layer over the decoder state, the context
    and the previous word, then the softmax. Here the decoder's output (with
    ``attentional_output``, already Luong's ``tanh(W [h_t; c_t])``, which holds
    the state and the context) goes through a pre-layer-norm position-wise
    feed-forward network with a residual, as in a Transformer block:
    ``out = x + Drop(W_2 relu(W_1 LN(x)))``. It runs on every target position
    at once (outside the recurrence), so its cost is that of two matrix products
    per token, and it gives the decoder the per-token capacity that a
    Transformer decoder keeps in its feed-forward sublayers.

    Args:
        units: int, width of the decoder's output (input and output width).
        hidden_units: int, width of the hidden layer.
        dropout: float, dropout rate on the residual branch.
        seed: optional int, seed of the dropout.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: (..., units).
        training: bool, whether dropout is active.
        mask: the Keras mask of ``inputs``; passes through.
    """

    def __init__(self, units, hidden_units, dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.hidden_units = check_positive_int("hidden_units", hidden_units)
        self.dropout = check_rate("dropout", dropout)
        self.seed = check_seed(seed)
        self.supports_masking = True
        policy = self.dtype_policy
        self.norm = keras.layers.LayerNormalization(
            epsilon=1e-5, dtype=policy, name="norm"
        )
        self.inner = keras.layers.Dense(
            hidden_units, activation="relu", dtype=policy, name="inner"
        )
        self.outer = keras.layers.Dense(units, dtype=policy, name="outer")
        self.dropout_layer = HashDropout(
            dropout, seed=seed, dtype=policy, name="dropout"
        )

    def build(self, inputs_shape):
        if inputs_shape[-1] != self.units:
            raise ValueError(
                f"DeepOutput(units={self.units}) needs inputs whose last axis is "
                f"{self.units}. Received: inputs.shape={tuple(inputs_shape)}"
            )
        self.norm.build(inputs_shape)
        self.inner.build(inputs_shape)
        self.outer.build(tuple(inputs_shape[:-1]) + (self.hidden_units,))
        self.dropout_layer.build(inputs_shape)
        self.built = True

    def call(self, inputs, training=None, mask=None):
        branch = self.outer(self.inner(self.norm(inputs)))
        return inputs + self.dropout_layer(branch, training=training)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "hidden_units": self.hidden_units,
                "dropout": self.dropout,
                "seed": self.seed,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_selfattn")
class DecoderBridge(keras.layers.Layer):
    """The decoder's initial recurrent state, computed from the encoder output.

    The mean of the encoder outputs over the non-padding source positions goes
    through one ``Dense(units, tanh)`` per recurrent state of the decoder (one per
    GRU layer; h and c per LSTM layer). Without a bridge the decoder would start
    from zeros and learn the sentence only through attention.

    Args:
        units: int, size of each state.
        num_states: int, how many states to produce.
        **kwargs: base layer arguments.
    """

    def __init__(self, units, num_states, **kwargs):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.num_states = check_positive_int("num_states", num_states)
        self.supports_masking = True
        self.projections = [
            keras.layers.Dense(
                units, activation="tanh", dtype=self.dtype_policy, name=f"state_{i}"
            )
            for i in range(num_states)
        ]

    def build(self, memory_shape):
        for projection in self.projections:
            projection.build((memory_shape[0], memory_shape[-1]))
        self.built = True

    def call(self, memory, mask=None):
        if mask is None:
            pooled = ops.mean(memory, axis=1)
        else:
            weights = ops.cast(ops.expand_dims(mask, -1), memory.dtype)
            count = ops.maximum(ops.sum(weights, axis=1), ops.cast(1.0, memory.dtype))
            pooled = ops.sum(memory * weights, axis=1) / count
        return [projection(pooled) for projection in self.projections]

    def compute_mask(self, memory, mask=None):
        return [None] * self.num_states

    def compute_output_shape(self, memory_shape):
        return [(memory_shape[0], self.units)] * self.num_states

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "num_states": self.num_states})
        return config
