"""A GRU/LSTM decoder with Bahdanau attention: a Keras RNN cell and its sequence layer.

Keras 3 removed ``keras.layers.RNN(constants=...)``, the way an attention cell used
to see the encoder memory. Here the memory travels as *constant states*: the cell's
state list ends with the memory, its key projection (computed once per sequence)
and the memory mask, which every step returns unchanged. This works inside
``keras.layers.RNN`` on TensorFlow (also with ``jit_compile=True``) and JAX.
"""

import collections

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
from keras_selfattn.layers.dropout import HashDropout
from keras_selfattn.layers.masking import (
    check_valid_lens,
    combine_masks,
    valid_lens_to_mask,
)

MAX_AUTO_UNROLL = 32  # the longest target BahdanauDecoder(unroll="auto") unrolls


def _check_memory_shape(memory_shape):
    memory_shape = tuple(memory_shape)
    if len(memory_shape) != 3 or memory_shape[-1] is None:
        raise ValueError(
            "memory must have shape (batch, memory_length, memory_dim) with a "
            f"known memory_dim. Received: memory.shape={memory_shape}"
        )
    return memory_shape


DecoderCellStates = collections.namedtuple(
    "DecoderCellStates",
    ["recurrent", "memory", "projected_keys", "memory_mask", "dropout_masks"],
)
DecoderCellStates.__doc__ = """The states of a `BahdanauDecoderCell`, by name.

`BahdanauDecoderCell.unpack_states` turns the flat states list (what
``keras.layers.RNN`` and the cell's ``call`` take) into this, and
`BahdanauDecoderCell.pack_states` turns it back; callers never index the list.

Attributes:
    recurrent: list of ``num_recurrent_states`` tensors (B, units), layer by
        layer from the bottom: ``h`` (GRU) or ``h, c`` (LSTM). The only states
        a step changes, and the only ones that differ between the hypotheses
        of one sentence in a beam search.
    memory: (B, T, Dm) the encoder outputs.
    projected_keys: (B, T, Dp) ``attention.project_keys(memory)``.
    memory_mask: (B, T) 0/1 floats, 1 where a memory position may be attended.
    dropout_masks: list of ``num_dropout_masks`` tensors (B, units).
"""


# The constructor arguments of the cell; `BahdanauDecoder` takes the same ones,
# hands them to its cell and reads them back from it (as keras.layers.GRU does
# with its GRUCell): the cell is their one home.
CELL_OPTIONS = (
    "units",
    "rnn_type",
    "num_layers",
    "dropout",
    "attention_score",
    "attention_heads",
    "kernel_initializer",
    "recurrent_initializer",
    "seed",
    "attentional_output",
    "residual",
    "layer_norm",
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
    ``constants=``). The states list is, in order:

    1. the recurrent states, layer by layer from the bottom: ``h`` (GRU) or
       ``h, c`` (LSTM), each (B, units): ``num_recurrent_states`` tensors;
    2. the memory (B, T, Dm), its key projection ``attention.project_keys(memory)``
       (B, T, Dp), and the memory mask as 0/1 floats (B, T) -- returned unchanged
       by every step;
    3. when ``dropout > 0`` and ``num_layers > 1``: one dropout mask (B, units)
       per layer above the first, also constant.

    Build that list with ``get_initial_state_for_memory(memory, ...)``, which
    projects the keys once. Callers never index it: ``unpack_states(states)``
    names its parts (a `DecoderCellStates`), ``pack_states(parts)`` makes the list
    again, and ``top_hidden_state(states)`` / ``attention_weights(states)`` give
    the query and the attention weights of the next step. ``state_size`` lists,
    for each state, its size per batch row and time step: ``units`` for the
    recurrent states and the dropout masks, ``Dm``, ``Dp`` and 1 for the memory,
    its projection and its mask. (``keras.layers.RNN`` wants ints there; its
    symbolic shapes for the three memory states are therefore (B, size), not
    (B, T, size): read only the
    recurrent states from an RNN's returned states.) The memory sizes are known
    once the cell is built or ``get_initial_state_for_memory`` has run.

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
        units,
        rnn_type="gru",
        num_layers=1,
        dropout=0.0,
        attention_score="additive",
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        seed=None,
        attentional_output=False,
        residual=False,
        layer_norm=False,
        attention_heads=1,
        **kwargs,
    ):
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
        self._memory_dim = None
        # A step's input may carry a Keras mask (see compute_mask): no warning.
        self.supports_masking = True

        self._create_sublayers()

    def _create_sublayers(self):
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
        cell_class = (
            keras.layers.GRUCell if self.rnn_type == "gru" else keras.layers.LSTMCell
        )
        self.rnn_cells = [
            cell_class(
                self.units,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                recurrent_initializer=clone_initializer(self.recurrent_initializer),
                dtype=self.dtype_policy,
                name=f"{self.rnn_type}_cell_{i}",
            )
            for i in range(self.num_layers)
        ]
        self.dropout_layer = HashDropout(
            self.dropout, seed=self.seed, dtype=self.dtype_policy, name="dropout"
        )
        # The input of every layer above the first: normalized (layer_norm) and
        # added back to that layer's output (residual), as RNMT+ stacks its layers.
        self.layer_norms = [
            keras.layers.LayerNormalization(
                epsilon=1e-5, dtype=self.dtype_policy, name=f"layer_norm_{i}"
            )
            for i in range(1, self.num_layers if self.layer_norm else 1)
        ]
        self.output_projection = (
            keras.layers.Dense(
                self.units,
                activation="tanh",
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="attentional_output",
            )
            if self.attentional_output
            else None
        )

    # ----------------------------------------------------------------- layout
    def options_config(self):
        """The constructor arguments (`CELL_OPTIONS`), serialized for get_config."""
        config = {name: getattr(self, name) for name in CELL_OPTIONS}
        for name in ("kernel_initializer", "recurrent_initializer"):
            config[name] = keras.initializers.serialize(config[name])
        return config

    @property
    def states_per_layer(self):
        """Recurrent states of one layer: ``h`` (GRU, 1) or ``h, c`` (LSTM, 2)."""
        return 2 if self.rnn_type == "lstm" else 1

    @property
    def num_recurrent_states(self):
        """Number of recurrent states: num_layers (GRU) or 2 * num_layers (LSTM)."""
        return self.num_layers * self.states_per_layer

    @property
    def num_dropout_masks(self):
        """Number of dropout-mask states at the end of the states list."""
        return self.num_layers - 1 if self.dropout > 0 else 0

    def unpack_states(self, states):
        """The flat states list -> `DecoderCellStates` (the layout, by name)."""
        states = list(states)
        n = self.num_recurrent_states
        expected = n + 3 + self.num_dropout_masks
        if len(states) != expected:
            raise ValueError(
                f"states must be a list of {expected} tensors (see "
                "BahdanauDecoderCell.unpack_states). "
                f"Received: {len(states)} tensors"
            )
        return DecoderCellStates(
            recurrent=states[:n],
            memory=states[n],
            projected_keys=states[n + 1],
            memory_mask=states[n + 2],
            dropout_masks=states[n + 3 :],
        )

    def pack_states(self, parts):
        """`DecoderCellStates` -> the flat states list ``call`` takes."""
        return [
            *parts.recurrent,
            parts.memory,
            parts.projected_keys,
            parts.memory_mask,
            *parts.dropout_masks,
        ]

    def top_hidden_state(self, states):
        """The last step's output (B, units): the next step's attention query.

        The top layer's hidden state ``h``; with ``residual`` stacking, the sum
        of every layer's ``h`` (what the residual stream carried out of the step).
        """
        recurrent = self.unpack_states(states).recurrent
        hidden = recurrent[:: self.states_per_layer]  # h of every layer
        if not self.residual:
            return hidden[-1]
        output = hidden[0]
        for h in hidden[1:]:
            output = output + h
        return output

    def attention_weights(self, states, queries=None, training=None):
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

    def _attend(self, queries, parts, training):
        """``(context, weights)`` of ``queries`` over the memory of ``parts``.

        The one attention call of the cell: a step's query (B, units) or a
        sequence's (B, S, units) against the memory, its projected keys and its
        mask, all from the unpacked states ``parts`` (`DecoderCellStates`).
        """
        return self.attention(
            queries,
            parts.memory,
            projected_keys=parts.projected_keys,
            keys_mask=ops.cast(parts.memory_mask, "bool"),
            training=training,
        )

    @property
    def state_size(self):
        if self._memory_dim is None:
            raise ValueError(
                "The state_size of a BahdanauDecoderCell depends on the memory's "
                "feature size: call get_initial_state_for_memory(memory) or build "
                "the cell (build(inputs_shape, states_shape)) first."
            )
        return self._layout(
            self.units,
            self._memory_dim,
            self.attention.projected_key_size(self.units, self._memory_dim),
            1,
        )

    @property
    def output_size(self):
        return self.units

    def _layout(self, unit, memory, projected_keys, memory_mask):
        """The states list with ``unit`` in every recurrent and dropout-mask slot."""
        return self.pack_states(
            DecoderCellStates(
                recurrent=[unit] * self.num_recurrent_states,
                memory=memory,
                projected_keys=projected_keys,
                memory_mask=memory_mask,
                dropout_masks=[unit] * self.num_dropout_masks,
            )
        )

    def states_shape(self, memory_shape):
        """The shapes of the states list for a memory of shape (B, T, Dm)."""
        batch, length, memory_dim = _check_memory_shape(memory_shape)
        key_dim = self.attention.projected_key_size(self.units, memory_dim)
        return self._layout(
            (batch, self.units),
            (batch, length, memory_dim),
            (batch, length, key_dim),
            (batch, length),
        )

    # ------------------------------------------------------------------ build
    def _build_attention(self, memory_shape):
        memory_shape = _check_memory_shape(memory_shape)
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

    def build(self, inputs_shape, states_shape=None):
        inputs_shape = tuple(inputs_shape)
        if states_shape is not None:
            self._build_attention(self.unpack_states(states_shape).memory)
        elif self._memory_dim is None:
            raise ValueError(
                "BahdanauDecoderCell needs the memory's shape to build: pass "
                "states_shape, or call get_initial_state_for_memory(memory) first."
            )
        batch = inputs_shape[0]
        input_dim = inputs_shape[-1] + self._memory_dim
        for i, rnn_cell in enumerate(self.rnn_cells):
            rnn_cell.build((batch, input_dim if i == 0 else self.units))
        for norm in self.layer_norms:
            norm.build((batch, self.units))
        if self.output_projection is not None:
            self.output_projection.build((batch, self.units + self._memory_dim))
        self.dropout_layer.build((batch, self.units))

    # ----------------------------------------------------------------- states
    def get_initial_state_for_memory(
        self,
        memory,
        memory_mask=None,
        memory_valid_lens=None,
        initial_state=None,
        training=None,
    ):
        """Builds the full states list for a memory, projecting its keys once.

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
        dtype = self.compute_dtype
        memory = ops.cast(memory, dtype)
        batch, length = ops.shape(memory)[0], ops.shape(memory)[1]

        length_mask = None
        if memory_valid_lens is not None:
            memory_valid_lens = check_valid_lens(
                memory_valid_lens, batch, name="memory_valid_lens"
            )
            length_mask = valid_lens_to_mask(memory_valid_lens, length)
        mask = combine_masks(length_mask, memory_mask)
        mask = (
            ops.ones((batch, length), dtype=dtype)
            if mask is None
            else ops.cast(mask, dtype)
        )

        projected_keys = ops.cast(self.attention.project_keys(memory), dtype)
        recurrent = self._initial_recurrent_states(initial_state, batch, dtype)
        dropout_masks = [
            self.dropout_layer(
                ops.ones((batch, self.units), dtype=dtype), training=training
            )
            for _ in range(self.num_dropout_masks)
        ]
        return self.pack_states(
            DecoderCellStates(recurrent, memory, projected_keys, mask, dropout_masks)
        )

    def _initial_recurrent_states(self, initial_state, batch, dtype):
        count = self.num_recurrent_states
        if initial_state is None:
            return [ops.zeros((batch, self.units), dtype=dtype) for _ in range(count)]
        if not isinstance(initial_state, (list, tuple)):
            initial_state = [initial_state]
        if len(initial_state) != count:
            layout = "h, c" if self.states_per_layer == 2 else "h"
            raise ValueError(
                f"initial_state must be a list of {count} tensors ({layout} for each "
                f"of the {self.num_layers} layers, bottom first). "
                f"Received: {len(initial_state)} tensors"
            )
        states = []
        for state in initial_state:
            state = ops.convert_to_tensor(state)
            if len(state.shape) != 2 or state.shape[-1] not in (None, self.units):
                raise ValueError(
                    f"Every initial state must have shape (batch, {self.units}). "
                    f"Received: shape={tuple(state.shape)}"
                )
            states.append(ops.cast(state, dtype))
        return states

    def get_initial_state(self, batch_size=None):
        # keras.layers.RNN calls this when no initial_state is given: a batch size
        # cannot make a memory, so say what to do instead.
        raise ValueError(
            "BahdanauDecoderCell carries the encoder memory in its states: call "
            "keras.layers.RNN(cell) with "
            "initial_state=cell.get_initial_state_for_memory(memory, ...), or use "
            "BahdanauDecoder."
        )

    # ------------------------------------------------------------------- call
    def call(self, inputs, states, training=None):
        parts = self.unpack_states(states)
        context, _ = self._attend(self.top_hidden_state(states), parts, training)
        return self.step_with_context(inputs, states, context, training=training)

    def step_with_context(self, inputs, states, context, training=None):
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
        per_layer = self.states_per_layer
        new_recurrent = []
        for i, rnn_cell in enumerate(self.rnn_cells):
            layer_input = x
            if i > 0 and self.layer_norms:
                layer_input = self.layer_norms[i - 1](layer_input)
            if i > 0 and parts.dropout_masks:
                layer_input = layer_input * ops.cast(
                    parts.dropout_masks[i - 1], x.dtype
                )
            layer_states = parts.recurrent[i * per_layer : (i + 1) * per_layer]
            output, layer_new = rnn_cell(layer_input, layer_states, training=training)
            x = x + output if i > 0 and self.residual else output
            new_recurrent.extend(layer_new)
        return x, self.pack_states(parts._replace(recurrent=new_recurrent))

    def decoder_output(self, hidden, states, training=None):
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

    def attention_context(self, queries, states, training=None):
        """The context (B, Dm) that a step's query (B, units) attends to
        (or (B, S, Dm) of (B, S, units) queries) over the memory of ``states``."""
        context, _ = self._attend(queries, self.unpack_states(states), training)
        return context

    def decoder_output_with_context(self, hidden, context, training=None):
        """`decoder_output` with the context of ``hidden`` given
        (`attention_context`); ``hidden`` itself without ``attentional_output``."""
        if self.output_projection is None:
            return hidden
        output = self.output_projection(
            ops.concatenate([hidden, ops.cast(context, hidden.dtype)], axis=-1)
        )
        return self.dropout_layer(output, training=training)

    def compute_mask(self, inputs, mask=None):
        # A step's input may carry the Keras mask of the training embedding
        # (Embedding(mask_zero=True)); a step does not use it (a padded target
        # step comes after the real ones and its output is ignored by the loss),
        # and its outputs carry none.
        return None

    def compute_output_shape(self, inputs_shape, states_shape):
        return (inputs_shape[0], self.units), [tuple(s) for s in states_shape]

    def compute_output_spec(self, inputs, states, training=None):
        output_shape, states_shape = self.compute_output_shape(
            inputs.shape, [s.shape for s in states]
        )
        return (
            keras.KerasTensor(output_shape, dtype=self.compute_dtype),
            [keras.KerasTensor(s, dtype=self.compute_dtype) for s in states_shape],
        )

    def get_config(self):
        config = super().get_config()
        config.update(self.options_config())
        return config


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
            optimizes across steps: the decoder's training step is about 30%
            faster under XLA (benchmarks/RESULTS.md, "What the profile found"),
            but XLA compiles it several times longer, and a forward pass alone
            gains little -- hence training calls only. The results are the same
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
        units,
        rnn_type="gru",
        num_layers=1,
        dropout=0.0,
        attention_score="additive",
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        seed=None,
        attentional_output=False,
        residual=False,
        layer_norm=False,
        attention_heads=1,
        unroll="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not (isinstance(unroll, bool) or unroll == "auto"):
            raise ValueError(
                f"unroll must be 'auto', True or False. Received: unroll={unroll!r}"
            )
        self.unroll = unroll
        self.supports_masking = True
        # The cell exists from here on, as keras.layers.GRU's does (for
        # step-by-step decoding); it checks and keeps the options, which this
        # layer reads back from it (the properties under ``options``).
        # build() builds it.
        self.cell = BahdanauDecoderCell(
            units,
            rnn_type=rnn_type,
            num_layers=num_layers,
            dropout=dropout,
            attention_score=attention_score,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            seed=seed,
            attentional_output=attentional_output,
            residual=residual,
            layer_norm=layer_norm,
            attention_heads=attention_heads,
            dtype=self.dtype_policy,
            name="cell",
        )
        self.rnn = None

    def build(self, inputs_shape, memory_shape):
        inputs_shape, memory_shape = tuple(inputs_shape), tuple(memory_shape)
        if len(inputs_shape) != 3 or inputs_shape[-1] is None:
            raise ValueError(
                "inputs must have shape (batch, target_length, embedding_dim) with a "
                f"known embedding_dim. Received: inputs_shape={inputs_shape}"
            )
        memory_shape = _check_memory_shape(memory_shape)
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
        inputs,
        memory,
        memory_valid_lens=None,
        initial_state=None,
        memory_mask=None,
        return_attention_scores=False,
        return_state=False,
        training=None,
    ):
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

    def compute_output_shape(self, inputs_shape, memory_shape):
        """The shape of ``H``, the output of a call without return_* flags."""
        return tuple(inputs_shape)[:2] + (self.units,)

    def compute_output_spec(
        self,
        inputs,
        memory,
        memory_valid_lens=None,
        initial_state=None,
        memory_mask=None,
        return_attention_scores=False,
        return_state=False,
        training=None,
    ):
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

    # ---------------------------------------------------------------- options
    # The cell's options, read back from it as keras.layers.GRU reads its
    # GRUCell's (the cell checks and keeps them; `CELL_OPTIONS` lists them).

    @property
    def units(self):
        """Size of every hidden state and of the attention (positive int)."""
        return self.cell.units

    @property
    def rnn_type(self):
        """The recurrent cell type, ``"gru"`` or ``"lstm"``."""
        return self.cell.rnn_type

    @property
    def num_layers(self):
        """Number of stacked recurrent layers (positive int)."""
        return self.cell.num_layers

    @property
    def dropout(self):
        """Dropout rate between stacked layers, in [0, 1)."""
        return self.cell.dropout

    @property
    def attention_score(self):
        """The attention score: additive, dot, general or scaled_dot."""
        return self.cell.attention_score

    @property
    def attention_heads(self):
        """Heads of the additive attention (positive int)."""
        return self.cell.attention_heads

    @property
    def kernel_initializer(self):
        """The initializer of the input kernels and the attention."""
        return self.cell.kernel_initializer

    @property
    def recurrent_initializer(self):
        """The initializer of the recurrent kernels."""
        return self.cell.recurrent_initializer

    @property
    def seed(self):
        """The seed of the dropout (optional int)."""
        return self.cell.seed

    @property
    def attentional_output(self):
        """Whether the output is ``tanh(W_c [h_t; c_t])``, not ``h_t``."""
        return self.cell.attentional_output

    @property
    def residual(self):
        """Whether stacked layers have residual connections."""
        return self.cell.residual

    @property
    def layer_norm(self):
        """Whether the inputs of stacked layers are layer-normalized."""
        return self.cell.layer_norm

    def get_config(self):
        config = super().get_config()
        config.update(self.cell.options_config(), unroll=self.unroll)
        return config
