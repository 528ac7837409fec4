"""One decoder step with Bahdanau attention: a Keras RNN cell.

Keras 3 removed ``keras.layers.RNN(constants=...)``, the way an attention cell used
to see the encoder memory. Here the memory travels as *constant states*: the cell's
state list ends with the memory, its key projection (computed once per sequence)
and the memory mask, which every step returns unchanged. This works inside
``keras.layers.RNN`` on TensorFlow (also with ``jit_compile=True``) and JAX.
"""

from collections.abc import Sequence
from typing import Any, NoReturn

import keras
from keras import ops

from keras_selfattn.choices import RNN_TYPES, SCORES
from keras_selfattn.layers.arguments import (
    check_bool,
    check_choice,
    check_positive_int,
    check_rate,
    check_seed,
    clone_initializer,
)
from keras_selfattn.layers.bahdanau_attention import BahdanauAttention
from keras_selfattn.layers.bahdanau_decoder_states import (
    DecoderCellStates,
    check_memory_shape,
    initial_states,
    keys_projected_by_steps,
    pack_states,
    state_size,
    states_shape,
    unpack_states,
)
from keras_selfattn.layers.dropout import HashDropout
from keras_selfattn.layers.stacked_recurrent import (
    make_attentional_output,
    make_layer_norms,
    make_rnn_cells,
    run_stack,
    stack_output,
)


@keras.saving.register_keras_serializable(package="keras_selfattn")
class BahdanauDecoderCell(keras.layers.Layer):
    """One decoder step with Bahdanau attention: a Keras RNN cell (d2l 11.4).

    At every step the query is the previous hidden state of the top layer; the
    context is ``attention(query, memory)`` (additive by default); the input of
    the first recurrent layer is ``concat(inputs_t, context)``; ``num_layers`` GRU
    (or LSTM) cells are stacked; the output is the new top hidden state. Memory
    positions masked by ``memory_valid_lens`` or ``memory_mask`` get attention
    weight 0; a sequence whose memory is entirely masked gets a zero context.

    The encoder memory travels in the states (Keras 3's ``keras.layers.RNN`` has no
    ``constants=``): the recurrent states (``h``, or ``h, c``, per layer), then
    the memory, its key projection and its mask (unchanged by every step), then
    the dropout masks; `keras_selfattn.layers.bahdanau_decoder_states` spells
    the layout out. Build that list with ``get_initial_state_for_memory(memory,
    ...)``, which projects the keys once. Callers never index it:
    ``unpack_states(states)`` names its parts (a `DecoderCellStates`),
    ``pack_states(parts)`` makes the list again, and ``top_hidden_state(states)``
    / ``attention_weights(states)`` give the query and the attention weights of
    the next step. The memory sizes in ``state_size`` are known once the cell is
    built or ``get_initial_state_for_memory`` has run.

    Dropout between stacked layers uses one mask per sequence, the same at every
    step (variational dropout, as ``keras.layers.GRU(dropout=...)`` does): the
    masks are drawn outside the loop because a JAX ``scan`` cannot advance a
    random seed inside its body (keras-team/keras-core#924). This is not the
    book's dropout: d2l's decoder stacks ``GRUCell(dropout=...)`` cells, which
    drop the input of every layer, the first one's (embedding and context)
    included. Here only the inputs of the layers above the first are dropped
    (with one layer there is no dropout), and never the recurrent state.

    Args:
        units: positive int, size of every hidden state and of the attention.
        rnn_type: ``"gru"`` (default) or ``"lstm"``.
        num_layers: positive int, number of stacked recurrent layers.
        dropout: float in [0, 1), dropout on the input of every layer above the
            first (no effect with one layer).
        attention_score: score of the attention, as
            ``BahdanauAttention(score=...)``: ``"additive"`` (default), ``"dot"``,
            ``"general"`` or ``"scaled_dot"`` (the dot scores need Dm == units).
        attention_heads: positive int, heads of the additive attention (RNMT+'s
            multi-head additive attention, ``BahdanauAttention(heads=...)``);
            must divide ``units`` and the memory size. Default 1.
        kernel_initializer: initializer of the input kernels and the attention.
        recurrent_initializer: initializer of the recurrent kernels.
        seed: optional int, seed of the dropout.
        attentional_output: bool. When True, `decoder_output` turns a
            step's output ``h_t`` into ``tanh(W_c [h_t; c_t])``, with ``c_t``
            the context ``h_t`` attends to (Luong et al. 2015's attentional
            vector, a form of Bahdanau's deep output), followed by dropout;
            `BahdanauDecoder` and `Seq2Seq.decode_step` apply it, ``call``
            does not (its output stays the recurrent state the next step
            needs). It gives the output layer a direct view of the source.
        residual: bool, add the input of every layer above the first to its
            output (residual stacking, RNMT+). No effect with one layer.
        layer_norm: bool, layer-normalize the input of every layer above the
            first (RNMT+). No effect with one layer.
        **kwargs: base layer arguments (``name``, ``dtype`` ...).

    Call arguments:
        inputs: (B, E), the (embedded) decoder input of this step.
        states: the list described above.
        training: bool, passed to the sublayers.

    Returns:
        A tuple ``(output, new_states)``: output (B, units) is the new top hidden
        state; new_states has the layout of ``states``.

    Example:

    ```python
    import numpy as np
    import keras_selfattn

    cell = keras_selfattn.layers.BahdanauDecoderCell(units=8)
    memory = np.random.rand(2, 5, 6).astype("float32")      # encoder outputs
    targets = np.random.rand(2, 3, 4).astype("float32")     # embedded targets
    valid_lens = np.array([3, 5])
    states = cell.get_initial_state_for_memory(memory, memory_valid_lens=valid_lens)
    for t in range(3):
        output, states = cell(targets[:, t], states)
    assert output.shape == (2, 8)
    ```

    References:
        - Bahdanau, Cho, Bengio, 2015. Neural Machine Translation by Jointly
          Learning to Align and Translate. https://arxiv.org/abs/1409.0473
        - Luong, Pham, Manning, 2015. Effective Approaches to Attention-based
          Neural Machine Translation. https://arxiv.org/abs/1508.04025
        - Zhang, Lipton, Li, Smola. Dive into Deep Learning, section 11.4
          (Seq2SeqAttentionDecoder).
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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
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
        self._memory_dim: int | None = None
        # A step's input may carry a Keras mask (see compute_mask): no warning.
        self.supports_masking = True

        self._create_sublayers()

    def _create_sublayers(self) -> None:
        # The sublayers are created with the cell, not in build(): the key
        # projection is computed by get_initial_state_for_memory() before the
        # first step, when the step-input width the recurrent cells need is not
        # known yet. build() builds them all.
        self.attention = BahdanauAttention(
            units=self.units,
            score=self.attention_score,
            heads=self.attention_heads,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="attention",
        )
        self.rnn_cells = make_rnn_cells(
            self.rnn_type,
            self.units,
            self.num_layers,
            self.kernel_initializer,
            self.recurrent_initializer,
            self.dtype_policy,
        )
        self.dropout_layer = HashDropout(
            self.dropout, seed=self.seed, dtype=self.dtype_policy, name="dropout"
        )
        # The input of every layer above the first: normalized (layer_norm) and
        # added back to that layer's output (residual), as RNMT+ stacks its layers.
        self.layer_norms = make_layer_norms(
            self.num_layers, self.layer_norm, self.dtype_policy
        )
        self.output_projection = (
            make_attentional_output(
                self.units, self.kernel_initializer, self.dtype_policy
            )
            if self.attentional_output
            else None
        )

    # ----------------------------------------------------------------- layout
    @property
    def states_per_layer(self) -> int:
        """Recurrent states of one layer: ``h`` (GRU, 1) or ``h, c`` (LSTM, 2)."""
        return 2 if self.rnn_type == "lstm" else 1

    @property
    def num_recurrent_states(self) -> int:
        """Number of recurrent states: num_layers (GRU) or 2 * num_layers (LSTM)."""
        return self.num_layers * self.states_per_layer

    @property
    def num_dropout_masks(self) -> int:
        """Number of dropout-mask states at the end of the states list."""
        return self.num_layers - 1 if self.dropout > 0 else 0

    def unpack_states(self, states: Sequence[Any]) -> DecoderCellStates:
        """The flat states list -> `DecoderCellStates` (the layout, by name)."""
        return unpack_states(states, self.num_recurrent_states, self.num_dropout_masks)

    def pack_states(self, parts: DecoderCellStates) -> list[Any]:
        """`DecoderCellStates` -> the flat states list ``call`` takes."""
        return pack_states(parts)

    def top_hidden_state(self, states: Sequence[Any]) -> Any:
        """The last step's output (B, units): the next step's attention query.

        The top layer's hidden state ``h``; with ``residual`` stacking, the sum
        of every layer's ``h`` (what the residual stream carried out of the step).
        """
        recurrent = self.unpack_states(states).recurrent
        hidden = recurrent[:: self.states_per_layer]  # h of every layer
        return stack_output(hidden, self.residual)

    def attention_weights(
        self,
        states: Sequence[Any],
        queries: Any = None,
        training: bool | None = None,
    ) -> Any:
        """The attention weights over the memory, without running a step.

        Args:
            states: the states list.
            queries: None for the query the next step will use (the top hidden
                state), giving (B, T); or (B, S, units) queries, giving (B, S, T).
            training: bool, passed to the attention.
        """
        if queries is None:
            queries = self.top_hidden_state(states)
        _, weights = self._attend(queries, self.unpack_states(states), training)
        return weights

    def _attend(
        self, queries: Any, parts: DecoderCellStates, training: bool | None
    ) -> tuple[Any, Any]:
        """``(context, weights)`` of ``queries`` over the memory of ``parts``.

        The one attention call of the cell: a step's query (B, units) or a
        sequence's (B, S, units) against the memory, its projected keys and its
        mask, all from the unpacked states ``parts`` (`DecoderCellStates`).
        """
        projected_keys = parts.projected_keys
        if keys_projected_by_steps(parts):
            projected_keys = None  # the attention projects the memory itself
        return self.attention(
            queries,
            parts.memory,
            projected_keys=projected_keys,
            keys_mask=ops.cast(parts.memory_mask, "bool"),
            training=training,
        )

    @property
    def state_size(self) -> list[Any]:
        return state_size(self, self._memory_dim)

    @property
    def output_size(self) -> int:
        return self.units

    def states_shape(self, memory_shape: Sequence[int | None]) -> list[Any]:
        """The shapes of the states list for a memory of shape (B, T, Dm)."""
        return states_shape(self, memory_shape)

    # ------------------------------------------------------------------ build
    def _build_attention(self, memory_shape: Any) -> None:
        memory_shape = check_memory_shape(memory_shape)
        memory_dim = int(memory_shape[-1])
        if self._memory_dim is not None:
            if memory_dim != self._memory_dim:
                raise ValueError(
                    f"This cell was built for memory_dim={self._memory_dim}. "
                    f"Received: memory.shape={memory_shape}"
                )
            return
        if self.attention_score in ("dot", "scaled_dot") and memory_dim != self.units:
            raise ValueError(
                f"attention_score={self.attention_score!r} needs memory_dim == units. "
                f"Received: units={self.units}, memory.shape={memory_shape}"
            )
        if not self.attention.built:
            self.attention.build((memory_shape[0], self.units), memory_shape)
        self._memory_dim = memory_dim

    def build(
        self,
        inputs_shape: Sequence[int | None],
        states_shape: Sequence[Any] | None = None,
    ) -> None:
        inputs_shape = tuple(inputs_shape)
        if states_shape is not None:
            self._build_attention(self.unpack_states(states_shape).memory)
        memory_dim = self._memory_dim  # set by _build_attention
        if memory_dim is None:
            raise ValueError(
                "BahdanauDecoderCell needs the memory's shape to build: pass "
                "states_shape, or call get_initial_state_for_memory(memory) first."
            )
        batch, feature_dim = inputs_shape[0], inputs_shape[-1]
        if feature_dim is None:
            raise ValueError(
                "The last dimension of a step's inputs must be known. "
                f"Received: inputs_shape={inputs_shape}"
            )
        input_dim = feature_dim + memory_dim
        for i, rnn_cell in enumerate(self.rnn_cells):
            rnn_cell.build((batch, input_dim if i == 0 else self.units))
        for norm in self.layer_norms:
            norm.build((batch, self.units))
        if self.output_projection is not None:
            self.output_projection.build((batch, self.units + memory_dim))
        self.dropout_layer.build((batch, self.units))

    def get_build_config(self) -> dict[str, Any] | None:
        # Inside keras.layers.RNN the cell is built with the step input's shape
        # alone (the memory's came from get_initial_state_for_memory): the
        # memory size is saved beside it, so that a loaded cell builds too.
        config = super().get_build_config()
        if config is not None and self._memory_dim is not None:
            config = {**config, "memory_dim": self._memory_dim}
        return config

    def build_from_config(self, config: dict[str, Any]) -> None:
        if config and config.get("memory_dim") is not None:
            self._build_attention((None, None, config["memory_dim"]))
        super().build_from_config(config)

    # ----------------------------------------------------------------- states
    def get_initial_state_for_memory(
        self,
        memory: Any,
        memory_mask: Any = None,
        memory_valid_lens: Any = None,
        initial_state: Any = None,
        training: bool | None = None,
    ) -> list[Any]:
        """Builds the full states list for a memory, projecting its keys once.

        On ``keras.Input`` tensors (a functional model that runs the cell with
        ``keras.layers.RNN(cell)(inputs, initial_state=states)``) the batch
        and lengths may be unknown; the states then leave the key projection
        to every step, so that the model saves and loads (see
        `keras_selfattn.layers.bahdanau_decoder_states.initial_states`).

        Args:
            memory: (B, T, Dm) encoder outputs.
            memory_mask: optional bool (B, T), True keeps a memory position.
            memory_valid_lens: optional int (B,); positions >= valid_len are
                masked. ANDed with ``memory_mask``.
            initial_state: None for zero recurrent states, or the list of
                ``num_recurrent_states`` tensors (B, units) in the order of the
                states layout (a single tensor is accepted when there is one).
            training: bool; draws the dropout masks when True (ones otherwise).

        Returns:
            The list of state tensors, in the compute dtype.
        """
        memory = ops.convert_to_tensor(memory)
        self._build_attention(memory.shape)
        return initial_states(
            self, memory, memory_mask, memory_valid_lens, initial_state, training
        )

    def get_initial_state(self, batch_size: int | None = None) -> NoReturn:
        # keras.layers.RNN calls this when no initial_state is given: a batch size
        # cannot make a memory, so say what to do instead.
        raise ValueError(
            "BahdanauDecoderCell carries the encoder memory in its states: call "
            "keras.layers.RNN(cell) with "
            "initial_state=cell.get_initial_state_for_memory(memory, ...), or use "
            "BahdanauDecoder."
        )

    # ------------------------------------------------------------------- call
    def call(
        self, inputs: Any, states: Sequence[Any], training: bool | None = None
    ) -> tuple[Any, list[Any]]:
        parts = self.unpack_states(states)
        context, _ = self._attend(self.top_hidden_state(states), parts, training)
        return self.step_with_context(inputs, states, context, training=training)

    def step_with_context(
        self,
        inputs: Any,
        states: Sequence[Any],
        context: Any,
        training: bool | None = None,
    ) -> tuple[Any, list[Any]]:
        """`call` with the step's context given: what ``top_hidden_state(states)``
        attends to (`attention_context`), e.g. kept from the previous step's
        `decoder_output_with_context`, whose query is the same tensor.

        Args:
            inputs: (B, E), the (embedded) decoder input of this step.
            states: the states list.
            context: (B, Dm) the context of ``top_hidden_state(states)``.
            training: bool, passed to the sublayers.

        Returns:
            ``(output, new_states)`` as `call`.
        """
        parts = self.unpack_states(states)
        x = ops.concatenate([inputs, ops.cast(context, inputs.dtype)], axis=-1)
        x, new_recurrent = run_stack(self, x, parts, training=training)
        return x, self.pack_states(parts._replace(recurrent=new_recurrent))

    def decoder_output(
        self, hidden: Any, states: Sequence[Any], training: bool | None = None
    ) -> Any:
        """The attentional vector ``tanh(W_c [h_t; c_t])`` (Luong et al. 2015, eq. 5).

        ``c_t`` is the context that the query ``h_t`` attends to (the same
        attention the next step uses), so the output sees the source directly,
        not only through the recurrent state. Without ``attentional_output``
        the output is ``hidden`` itself.

        Args:
            hidden: (B, units) a step's output, or (B, S, units) a sequence's.
            states: the states list (for the memory, its keys and its mask).
            training: bool, passed to the attention and the dropout.

        Returns:
            A tensor of the shape of ``hidden``.
        """
        if self.output_projection is None:
            return hidden
        context = self.attention_context(hidden, states, training=training)
        return self.decoder_output_with_context(hidden, context, training=training)

    def attention_context(
        self, queries: Any, states: Sequence[Any], training: bool | None = None
    ) -> Any:
        """The context (B, Dm) that a step's query (B, units) attends to
        (or (B, S, Dm) of (B, S, units) queries) over the memory of ``states``."""
        context, _ = self._attend(queries, self.unpack_states(states), training)
        return context

    def decoder_output_with_context(
        self, hidden: Any, context: Any, training: bool | None = None
    ) -> Any:
        """`decoder_output` with the context of ``hidden`` given
        (`attention_context`); ``hidden`` itself without ``attentional_output``."""
        if self.output_projection is None:
            return hidden
        output = self.output_projection(
            ops.concatenate([hidden, ops.cast(context, hidden.dtype)], axis=-1)
        )
        return self.dropout_layer(output, training=training)

    def compute_mask(self, inputs: Any, mask: Any = None) -> None:
        # A step's input may carry the Keras mask of the training embedding
        # (Embedding(mask_zero=True)); a step does not use it (a padded target
        # step comes after the real ones and its output is ignored by the loss),
        # and its outputs carry none.
        return None

    def compute_output_shape(
        self,
        inputs_shape: Sequence[int | None],
        states_shape: Sequence[Sequence[int | None]],
    ) -> tuple[tuple[int | None, ...], list[tuple[int | None, ...]]]:
        return (inputs_shape[0], self.units), [tuple(s) for s in states_shape]

    def compute_output_spec(
        self, inputs: Any, states: Sequence[Any], training: bool | None = None
    ) -> tuple[Any, list[Any]]:
        output_shape, states_shape = self.compute_output_shape(
            inputs.shape, [s.shape for s in states]
        )
        return (
            keras.KerasTensor(output_shape, dtype=self.compute_dtype),
            [keras.KerasTensor(s, dtype=self.compute_dtype) for s in states_shape],
        )

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
            }
        )
        return config
