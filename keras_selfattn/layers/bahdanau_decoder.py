"""A GRU/LSTM decoder with Bahdanau attention over a whole target sequence.

The steps are those of `BahdanauDecoderCell`, run by a ``keras.layers.RNN``
sublayer or, for short training calls, an unrolled loop.
"""

from collections.abc import Sequence
from typing import Any

import keras
from keras import ops

from keras_selfattn.choices import RNN_TYPES, SCORES
from keras_selfattn.layers.arguments import (
    check_bool,
    check_choice,
    check_positive_int,
    check_rate,
    check_seed,
)
from keras_selfattn.layers.bahdanau_decoder_cell import BahdanauDecoderCell
from keras_selfattn.layers.bahdanau_decoder_states import check_memory_shape

MAX_AUTO_UNROLL = 32  # the longest target BahdanauDecoder(unroll="auto") unrolls


@keras.saving.register_keras_serializable(package="keras_selfattn")
class BahdanauDecoder(keras.layers.Layer):
    """Runs a ``BahdanauDecoderCell`` over a whole target sequence (teacher forcing).

    ``H = decoder(inputs, memory)`` gives the top hidden state after every step,
    exactly what a Python loop calling ``decoder.cell`` step by step gives
    (d2l's Seq2SeqAttentionDecoder, section 11.4). The loop is a
    ``keras.layers.RNN`` sublayer; the memory, its key projection (computed once)
    and its mask travel as constant states (see ``BahdanauDecoderCell``).

    Masking: memory positions beyond ``memory_valid_lens`` and those masked by
    the memory's Keras mask (``Embedding(mask_zero=True)`` in the encoder; Keras
    passes it as ``memory_mask``) get attention weight 0, combined with AND. The
    Keras mask of ``inputs`` (target padding) is not used by the recurrence --
    padded target steps come after the real ones, so they cannot change them -- it
    is passed on to ``H`` so that a masked loss ignores those steps.

    Attention weights are not carried through the loop: with
    ``return_attention_scores=True`` they are recomputed after it in one batched
    call, from the queries the steps used (the initial top state, then the top
    state after each step but the last) -- equal to collecting them step by step.

    Args:
        units: positive int, size of every hidden state and of the attention.
        rnn_type: ``"gru"`` (default) or ``"lstm"``.
        num_layers: positive int, number of stacked recurrent layers.
        dropout: float in [0, 1), dropout between stacked layers (one mask per
            sequence, see ``BahdanauDecoderCell``).
        attention_score: ``"additive"`` (default), ``"dot"``, ``"general"`` or
            ``"scaled_dot"``.
        attention_heads: positive int, heads of the additive attention (see
            `BahdanauDecoderCell`). Default 1.
        kernel_initializer: initializer of the input kernels and the attention.
        recurrent_initializer: initializer of the recurrent kernels.
        seed: optional int, seed of the dropout.
        attentional_output: bool, the output is ``tanh(W_c [h_t; c_t])``
            (see `BahdanauDecoderCell`) instead of ``h_t``.
        residual: bool, residual connections between stacked layers.
        layer_norm: bool, layer-normalized inputs of stacked layers.
        unroll: ``"auto"`` (default), True or False. True runs the steps as an
            unrolled Python loop, False as ``keras.layers.RNN``'s symbolic loop.
            ``"auto"`` unrolls in training calls (``training=True``) whose target
            length is known when the call is traced (static shapes: XLA, JAX, a
            fixed-length dataset) and at most ``MAX_AUTO_UNROLL`` (32) steps.
            Unrolled, the backward pass needs no per-step stacks and XLA
            optimizes across steps: the decoder's training step is faster under
            XLA (benchmarks/RESULTS.md, "Performance against the peers"), but XLA
            compiles it several times longer, and a forward pass alone gains
            little -- hence training calls only. The results are the same
            either way. True needs a known target length.
        **kwargs: base layer arguments (``name``, ``dtype`` ...).

    Call arguments:
        inputs: (B, S, E), the embedded target sequence (shifted right).
        memory: (B, T, Dm), the encoder outputs.
        memory_valid_lens: optional int (B,), valid memory lengths.
        initial_state: None for zeros, or the list of recurrent states,
            ``h`` (GRU) or ``h, c`` (LSTM) per layer, bottom first, each
            (B, units); a single tensor for a one-layer GRU. A seq2seq model
            passes the encoder's final states (or a bridge of them) here.
        memory_mask: optional bool (B, T); filled by Keras from the memory's
            Keras mask.
        return_attention_scores: bool, also return the attention weights.
        return_state: bool, also return the final recurrent states (the list
            to pass as ``initial_state`` to continue decoding).
        training: bool, passed to the sublayers.

    Returns:
        ``H`` (B, S, units), the top hidden states (or, with
        ``attentional_output``, the attentional vectors); with
        ``return_attention_scores`` a tuple ``(H, A)``,
        A (B, S, T); with ``return_state`` ``(H, states)`` or ``(H, A, states)``,
        states a list of ``cell.num_recurrent_states`` tensors (B, units).
        In the compute dtype.

    Example:

    ```python
    import numpy as np
    import keras_selfattn

    decoder = keras_selfattn.layers.BahdanauDecoder(units=8)
    targets = np.random.rand(2, 3, 4).astype("float32")   # embedded targets
    memory = np.random.rand(2, 5, 6).astype("float32")    # encoder outputs
    H, A = decoder(targets, memory, memory_valid_lens=np.array([3, 5]),
                   return_attention_scores=True)
    assert H.shape == (2, 3, 8) and A.shape == (2, 3, 5)
    ```

    References:
        - Bahdanau, Cho, Bengio, 2015. Neural Machine Translation by Jointly
          Learning to Align and Translate. https://arxiv.org/abs/1409.0473
        - Luong, Pham, Manning, 2015. Effective Approaches to Attention-based
          Neural Machine Translation. https://arxiv.org/abs/1508.04025
        - Zhang, Lipton, Li, Smola. Dive into Deep Learning, section 11.4.
    """

    def __init__(
        self,
        units: int,
        rnn_type: str = "gru",
        num_layers: int = 1,
        dropout: float = 0.0,
        attention_score: str = "additive",
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        recurrent_initializer: str | keras.initializers.Initializer = "orthogonal",
        seed: int | None = None,
        attentional_output: bool = False,
        residual: bool = False,
        layer_norm: bool = False,
        attention_heads: int = 1,
        unroll: bool | str = "auto",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not (isinstance(unroll, bool) or unroll == "auto"):
            raise ValueError(
                f"unroll must be 'auto', True or False. Received: unroll={unroll!r}"
            )
        # The options, checked here as the cell checks them, and handed to the
        # cell (as keras.layers.GRU hands its options to its GRUCell).
        self.units = check_positive_int("units", units)
        self.rnn_type = check_choice("rnn_type", rnn_type, RNN_TYPES)
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.dropout = check_rate("dropout", dropout)
        self.attention_score = check_choice("attention_score", attention_score, SCORES)
        self.attention_heads = check_positive_int("attention_heads", attention_heads)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.seed = check_seed(seed)
        self.attentional_output = check_bool("attentional_output", attentional_output)
        self.residual = check_bool("residual", residual)
        self.layer_norm = check_bool("layer_norm", layer_norm)
        self.unroll = unroll
        self.supports_masking = True
        # The cell exists from here on, as keras.layers.GRU's does (for
        # step-by-step decoding). build() builds it.
        self.cell = BahdanauDecoderCell(
            self.units,
            rnn_type=self.rnn_type,
            num_layers=self.num_layers,
            dropout=self.dropout,
            attention_score=self.attention_score,
            kernel_initializer=self.kernel_initializer,
            recurrent_initializer=self.recurrent_initializer,
            seed=self.seed,
            attentional_output=self.attentional_output,
            residual=self.residual,
            layer_norm=self.layer_norm,
            attention_heads=self.attention_heads,
            dtype=self.dtype_policy,
            name="cell",
        )
        self.rnn: Any = None  # a keras.layers.RNN, made in build()

    def build(
        self, inputs_shape: Sequence[int | None], memory_shape: Sequence[int | None]
    ) -> None:
        inputs_shape, memory_shape = tuple(inputs_shape), tuple(memory_shape)
        if len(inputs_shape) != 3 or inputs_shape[-1] is None:
            raise ValueError(
                "inputs must have shape (batch, target_length, embedding_dim) with a "
                f"known embedding_dim. Received: inputs_shape={inputs_shape}"
            )
        memory_shape = check_memory_shape(memory_shape)
        self.cell.build(
            (inputs_shape[0], inputs_shape[-1]), self.cell.states_shape(memory_shape)
        )
        # The loop layer is made here: keras.layers.RNN reads the cell's
        # state_size when it is constructed, and the memory's part of it is
        # known only now.
        self.rnn = keras.layers.RNN(
            self.cell,
            return_sequences=True,
            return_state=True,
            dtype=self.dtype_policy,
            name="rnn",
        )
        self.rnn.build(inputs_shape)

    def call(
        self,
        inputs: Any,
        memory: Any,
        memory_valid_lens: Any = None,
        initial_state: Any = None,
        memory_mask: Any = None,
        return_attention_scores: bool = False,
        return_state: bool = False,
        training: bool | None = None,
    ) -> Any:
        cell = self.cell
        states = cell.get_initial_state_for_memory(
            memory,
            memory_mask=memory_mask,
            memory_valid_lens=memory_valid_lens,
            initial_state=initial_state,
            training=training,
        )
        num_recurrent = cell.num_recurrent_states
        length = inputs.shape[1]
        if self.unroll is True and length is None:
            raise ValueError(
                "unroll=True needs a target length known when the call is traced. "
                f"Received: inputs.shape={tuple(inputs.shape)}"
            )
        auto = self.unroll == "auto" and training is True and length is not None
        if length and (self.unroll is True or (auto and length <= MAX_AUTO_UNROLL)):
            # What keras.layers.RNN(unroll=True) does, without a second RNN layer
            # (which would track the cell's weights twice).
            step_states, outputs = states, []
            for t in range(length):
                output, step_states = cell(inputs[:, t], step_states, training=training)
                outputs.append(output)
            final_recurrent = cell.unpack_states(step_states).recurrent
            hidden = ops.stack(outputs, axis=1)
        else:
            outputs = self.rnn(inputs, initial_state=states, training=training)
            # keras.layers.RNN returns [sequence, *states]; the recurrent states
            # come first (its symbolic shapes of the memory states are not the
            # memory's: read only these).
            hidden, final_recurrent = outputs[0], list(outputs[1 : 1 + num_recurrent])
        results = [cell.decoder_output(hidden, states, training=training)]
        if return_attention_scores:
            # The query of step s is the top state after step s - 1 (the initial
            # top state for s = 0): recompute all the weights in one call.
            queries = ops.concatenate(
                [ops.expand_dims(cell.top_hidden_state(states), 1), hidden[:, :-1]],
                axis=1,
            )
            results.append(cell.attention_weights(states, queries, training=training))
        if return_state:
            results.append(list(final_recurrent))
        return results[0] if len(results) == 1 else tuple(results)

    def compute_output_shape(
        self, inputs_shape: Sequence[int | None], memory_shape: Sequence[int | None]
    ) -> tuple[int | None, ...]:
        """The shape of ``H``, the output of a call without return_* flags."""
        return tuple(inputs_shape)[:2] + (self.units,)

    def compute_output_spec(
        self,
        inputs: Any,
        memory: Any,
        memory_valid_lens: Any = None,
        initial_state: Any = None,
        memory_mask: Any = None,
        return_attention_scores: bool = False,
        return_state: bool = False,
        training: bool | None = None,
    ) -> Any:
        batch, length = inputs.shape[0], inputs.shape[1]
        dtype = self.compute_dtype
        results = [keras.KerasTensor((batch, length, self.units), dtype=dtype)]
        if return_attention_scores:
            results.append(
                keras.KerasTensor((batch, length, memory.shape[1]), dtype=dtype)
            )
        if return_state:
            results.append(
                [
                    keras.KerasTensor((batch, self.units), dtype=dtype)
                    for _ in range(self.cell.num_recurrent_states)
                ]
            )
        return results[0] if len(results) == 1 else tuple(results)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "rnn_type": self.rnn_type,
                "num_layers": self.num_layers,
                "dropout": self.dropout,
                "attention_score": self.attention_score,
                "attention_heads": self.attention_heads,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "recurrent_initializer": keras.initializers.serialize(
                    self.recurrent_initializer
                ),
                "seed": self.seed,
                "attentional_output": self.attentional_output,
                "residual": self.residual,
                "layer_norm": self.layer_norm,
                "unroll": self.unroll,
            }
        )
        return config
