"""The translation model: a self-attention encoder and a Bahdanau decoder.

`Seq2Seq` is a functional ``keras.Model`` (so ``fit``, ``predict``, ``summary`` and
``.keras`` files work as for any functional model) that also answers the questions
step-by-step decoding asks -- ``encode``, ``initial_decoder_state``,
``decode_step`` -- in the way keras-hub's ``Seq2SeqLM`` backbones do. Greedy and
beam search (`keras_selfattn.decoding`), `Translator` and the serving graphs use
only these methods, never the model's layer names.
"""

import contextlib
import dataclasses
from typing import Any

import keras
from keras import ops

from keras_selfattn.config import ModelConfig
from keras_selfattn.layers import BahdanauDecoder
from keras_selfattn.layers.arguments import check_seed, check_vocab_size, offset_seed
from keras_selfattn.models.blocks import (
    DecoderBridge,
    DeepOutput,
    ScaledTokenEmbedding,
    TiedEmbedding,
    TransformerEncoderBlock,
)
from keras_selfattn.models.encoder_position import create_position
from keras_selfattn.reserved_ids import PAD_ID

__all__ = ["Seq2Seq", "build_seq2seq"]


@keras.saving.register_keras_serializable(package="keras_selfattn")
class Seq2Seq(keras.Model):
    """The encoder-decoder translation model, with a step-by-step decoding API.

    Encoder: ``ScaledTokenEmbedding`` (id 0 is padding and masked, scaled by
    sqrt(num_hiddens)) -> position -> ``num_layers`` x ``TransformerEncoderBlock``
    (``MultiHeadSelfAttention``, residual, layer norm, feed-forward). The position
    comes from ``config.position``: ``"sinusoidal"`` adds the fixed table
    (``PositionalEncoding``, the default), ``"learned"`` a trainable one
    (``LearnedPositionalEncoding``); ``"relative"`` (Shaw et al. 2018, offsets
    clipped at ``max_relative_position``) and ``"rotary"`` (RoPE, Su et al. 2021)
    add nothing to the embeddings (only dropout) and let every self-attention see
    offsets instead. Bridge: the masked mean of the encoder output, one
    ``Dense(tanh)`` per decoder state, is the decoder's initial state. Decoder:
    target embedding -> ``BahdanauDecoder`` attending over the encoder output with
    the encoder's padding mask -> ``Dense(target_vocab_size)`` logits in float32
    (with ``config.tie_embeddings``, the target embedding's own matrix instead:
    `TiedEmbedding`).

    The model is built with the functional API inside its constructor, so it
    is a functional model with inputs ``{"source": (B, T) int32, "target_in":
    (B, S) int32}`` (id 0 = padding) and logits ``(B, S, target_vocab_size)``.
    ``get_config`` holds the constructor arguments and ``from_config`` rebuilds
    it (a ``.keras`` file stores the arguments and the weights). Models saved
    before this class existed (plain functional ``.keras`` files) do not load
    as a `Seq2Seq`: retrain them.

    Decoding, one step at a time (what `keras_selfattn.decoding` does inside a
    ``keras.ops.while_loop``)::

        state = model.initial_decoder_state(source_ids)     # runs the encoder once
        tokens = START_ID for every row
        logits, state = model.decode_step(tokens, state)    # (B, V) float32
        weights = model.decoder_attention(state)            # (B, T): the next step's
        state = model.reorder_decoder_state(state, rows)    # beam search: pick rows

    ``state`` is the decoder cell's state list (see `BahdanauDecoderCell`), with
    ``attentional_output`` followed by the next step's attention context (see
    `decode_step`): a flat list of tensors, fit for ``keras.ops.while_loop``, that
    callers pass back as it came.

    Args:
        source_vocab_size: int >= 5, number of source token ids (0 = padding).
        target_vocab_size: int >= 5, number of target token ids (0 = padding).
        config: a `ModelConfig` (or the dict of one); defaults to ``ModelConfig()``.
        seed: optional int; the dropout seeds derive from it.
        **kwargs: ``keras.Model`` arguments (``name``, ``dtype``, ...).

    Example:

    >>> import numpy as np, keras_selfattn
    >>> from keras_selfattn.models import ModelConfig, Seq2Seq
    >>> model = Seq2Seq(20, 12, ModelConfig(num_hiddens=16, num_heads=2,
    ...     num_layers=1, ffn_hiddens=32, decoder_units=16, embedding_dim=8))
    >>> source = np.array([[5, 6, 7, 0]], "int32")
    >>> state = model.initial_decoder_state(source)
    >>> logits, state = model.decode_step(np.array([2], "int32"), state)
    >>> tuple(logits.shape), tuple(model.decoder_attention(state).shape)
    ((1, 12), (1, 4))

    References:
        - Vaswani et al. 2017, "Attention Is All You Need".
        - Bahdanau, Cho, Bengio, 2015. Neural Machine Translation by Jointly
          Learning to Align and Translate.
        - Zhang et al., "Dive into Deep Learning", sections 11.4 and 11.7.
    """

    def __init__(
        self, source_vocab_size, target_vocab_size, config=None, seed=None, **kwargs
    ):
        if config is None:
            config = ModelConfig()
        elif isinstance(config, dict):
            config = ModelConfig.from_dict(config)
        elif not isinstance(config, ModelConfig):
            raise ValueError(
                "config must be a ModelConfig, a dict of its fields or None. "
                f"Received: config={config!r}"
            )
        check_vocab_size("source_vocab_size", source_vocab_size)
        check_vocab_size("target_vocab_size", target_vocab_size)
        seed = check_seed(seed)
        # One dtype policy for every layer (the logits stay float32), kept in the
        # config so that a .keras file reloads with the policy it was built with.
        dtype = kwargs.pop("dtype", None)
        policy = (
            keras.config.dtype_policy()
            if dtype is None
            else keras.dtype_policies.get(dtype)
        )

        self._create_encoder(source_vocab_size, config, policy, seed)
        self._create_decoder(target_vocab_size, config, policy, seed)

        # === Functional model ===
        source = keras.Input(shape=(None,), dtype="int32", name="source")
        target_in = keras.Input(shape=(None,), dtype="int32", name="target_in")
        memory = self._encode(source, training=None)
        initial_state = self.bridge(memory)
        hidden = self.decoder(
            self.target_embedding(target_in), memory, initial_state=initial_state
        )
        logits = self._logits(hidden, training=None)
        kwargs.setdefault("name", "seq2seq")
        super().__init__(
            inputs={"source": source, "target_in": target_in},
            outputs=logits,
            dtype=policy,
            **kwargs,
        )
        # The policy the layers were built with. Keras' functional model does
        # not keep the ``dtype`` it is given (its dtype_policy is the global one
        # at construction), so get_config reads this: a bfloat16 model loaded
        # under the float32 default and saved again stays bfloat16.
        self.layers_dtype_policy = policy

        # === Config ===
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size
        self.model_config = config
        self.seed = seed

    # ----------------------------------------------------------------- layers
    def _create_encoder(self, source_vocab_size, config, policy, seed):
        """The encoder's layers: embedding, position, blocks, final norm."""
        self.source_embedding = ScaledTokenEmbedding(
            source_vocab_size, config.num_hiddens, name="source_embedding", dtype=policy
        )
        self.position, position_options = create_position(
            config, policy, offset_seed(seed, 0)
        )
        self.encoder_blocks = [
            TransformerEncoderBlock(
                config.num_hiddens,
                config.num_heads,
                config.ffn_hiddens,
                dropout=config.dropout,
                norm_first=config.norm_first,
                seed=offset_seed(seed, 1 + i),
                name=f"encoder_block_{i}",
                dtype=policy,
                **position_options,
            )
            for i in range(config.num_layers)
        ]
        self.encoder_final_norm = (
            keras.layers.LayerNormalization(
                epsilon=1e-5, name="encoder_final_norm", dtype=policy
            )
            if config.norm_first
            else None
        )

    def _create_decoder(self, target_vocab_size, config, policy, seed):
        """The decoder's layers: Bahdanau decoder, bridge, target embedding, logits."""
        self.decoder = BahdanauDecoder(
            config.decoder_units,
            num_layers=config.decoder_layers,
            rnn_type=config.rnn_type,
            attention_score=config.attention_score,
            dropout=config.dropout,
            seed=offset_seed(seed, 100),
            attentional_output=config.attentional_output,
            residual=config.decoder_residual,
            layer_norm=config.decoder_layer_norm,
            attention_heads=config.attention_heads,
            name="decoder",
            dtype=policy,
        )
        self.bridge = DecoderBridge(
            config.decoder_units,
            self.decoder.cell.num_recurrent_states,
            name="bridge",
            dtype=policy,
        )
        self.deep_output = (
            DeepOutput(
                config.decoder_units,
                config.deep_output_hiddens,
                dropout=config.dropout,
                seed=offset_seed(seed, 101),
                name="deep_output",
                dtype=policy,
            )
            if config.deep_output_hiddens
            else None
        )
        if config.tie_embeddings:
            self.target_embedding = TiedEmbedding(
                target_vocab_size,
                config.embedding_dim,
                name="target_embedding",
                dtype=policy,
            )
            self.logits_dense = None
        else:
            self.target_embedding = keras.layers.Embedding(
                target_vocab_size,
                config.embedding_dim,
                mask_zero=True,
                name="target_embedding",
                dtype=policy,
            )
            self.logits_dense = keras.layers.Dense(
                target_vocab_size, dtype="float32", name="logits"
            )

    def _logits(self, hidden, training=False):
        """Decoder outputs (..., decoder_units) -> float32 logits over the targets
        (through the deep output, when the model has one)."""
        if self.deep_output is not None:
            hidden = self.deep_output(hidden, training=training)
        if self.logits_dense is None:
            return self.target_embedding(hidden, reverse=True)
        return self.logits_dense(hidden)

    def decoding_invariants(self):
        """A context for building a decoding loop: the step's weights that a
        loop can compute once before it (the tied output's ``E^T``,
        `TiedEmbedding.output_kernel_held`) are computed on entry and held
        while inside. The greedy and beam searches of `keras_selfattn.decoding`
        enter it on TensorFlow; the tokens are the same, the scores equal to float
        rounding."""
        if self.logits_dense is None:
            return self.target_embedding.output_kernel_held()
        return contextlib.nullcontext()

    # ---------------------------------------------------------------- encoder
    def _encode(self, source_ids, training=None):
        """Source ids -> encoder output (B, T, num_hiddens), carrying its Keras mask."""
        x = self.position(self.source_embedding(source_ids), training=training)
        for block in self.encoder_blocks:
            x = block(x, training=training)
        if self.encoder_final_norm is not None:
            x = self.encoder_final_norm(x)
        return x

    def encode(self, source_ids, training=False):
        """Runs the encoder and the bridge once.

        Args:
            source_ids: int (B, T) source ids, 0-padded.
            training: bool, passed to the layers (dropout).

        Returns:
            dict: ``memory`` (B, T, num_hiddens) the encoder output,
            ``memory_mask`` bool (B, T) (False at padding), ``initial_state`` the
            list of the decoder's recurrent states (B, decoder_units) from the
            bridge.
        """
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        memory = self._encode(source_ids, training=training)
        return {
            "memory": memory,
            "memory_mask": ops.not_equal(source_ids, PAD_ID),
            "initial_state": list(self.bridge(memory, training=training)),
        }

    # ---------------------------------------------------------------- decoder
    def initial_decoder_state(self, source_ids, training=False):
        """Encodes ``source_ids`` and returns the decoder's state before step 0.

        Args:
            source_ids: int (B, T) source ids, 0-padded.
            training: bool (dropout in the encoder and the decoder).

        Returns:
            The decoder cell's states list (flat list of tensors; see
            `BahdanauDecoderCell`), with the memory keys projected once; with
            ``attentional_output``, followed by the context that the next
            step's query attends to (see `decode_step`).
        """
        encoded = self.encode(source_ids, training=training)
        cell = self.decoder.cell
        states = cell.get_initial_state_for_memory(
            encoded["memory"],
            memory_mask=encoded["memory_mask"],
            initial_state=encoded["initial_state"],
            training=training,
        )
        states = [ops.convert_to_tensor(s) for s in states]
        if not self._carries_context:
            return states
        query = cell.top_hidden_state(states)
        return [*states, cell.attention_context(query, states, training=training)]

    @property
    def _carries_context(self):
        """Whether the decoding state ends with the next step's context: with
        ``attentional_output`` a step's output attends to the memory, and the
        next step's query is that same output, so its context is kept, not
        computed twice."""
        return self.decoder.cell.output_projection is not None

    def _split_context(self, decoder_state):
        """The decoding state -> (the cell's states list, the kept context or None)."""
        decoder_state = list(decoder_state)
        if not self._carries_context:
            return decoder_state, None
        return decoder_state[:-1], decoder_state[-1]

    def decode_step(self, token_ids, decoder_state, training=False, logits_of=None):
        """One decoder step.

        Args:
            token_ids: int (B,) the previous tokens (``START_ID`` at step 0).
            decoder_state: the states list from `initial_decoder_state` or the
                previous step.
            training: bool (decoder dropout).
            logits_of: None (the model's own output layer), or a function of
                the (B, decoder_units) decoder output -> float32 (B, W) logits:
                a search's own output layer (a request's vocabulary shortlist,
                products in lower precision: `keras_selfattn.models.output_layer`),
                given by the search, never kept on the model.

        Returns:
            ``(logits, new_state)``: float32 (B, target_vocab_size) logits of the
            next token (or ``logits_of``'s), and the states list for the next step.

        With ``attentional_output`` the step's output attends to the memory
        (`BahdanauDecoderCell.decoder_output`), and the next step's query is
        that output: its context is kept at the end of the state and the next
        step reuses it (at inference; with ``training`` the step attends again,
        with its own attention dropout), one attention a step instead of two.
        """
        embedded = self.target_embedding(ops.convert_to_tensor(token_ids, "int32"))
        cell = self.decoder.cell
        cell_states, context = self._split_context(decoder_state)
        if context is None or training:
            output, states = cell(embedded, cell_states, training=training)
        else:
            output, states = cell.step_with_context(
                embedded, cell_states, context, training=training
            )
        states = [ops.convert_to_tensor(s) for s in states]
        if context is None:
            output = cell.decoder_output(output, states, training=training)
        else:
            context = cell.attention_context(output, states, training=training)
            output = cell.decoder_output_with_context(
                output, context, training=training
            )
            states.append(ops.convert_to_tensor(context))
        if logits_of is None:
            logits = self._logits(output, training=training)
        else:
            logits = logits_of(output)
        return ops.cast(logits, "float32"), states

    def decoder_attention(self, decoder_state):
        """float32 (B, T): the attention weights over the source the next step uses."""
        cell_states, _ = self._split_context(decoder_state)
        weights = self.decoder.cell.attention_weights(cell_states, training=False)
        return ops.cast(weights, "float32")

    def reorder_decoder_state(self, decoder_state, indices):
        """The state of rows ``indices`` (a beam search's surviving hypotheses).

        Only the recurrent states (and the kept context, see `decode_step`)
        are gathered: the memory, its projection and
        mask (and the dropout masks, all ones at inference) are the same for
        every hypothesis of one sentence, which is what a beam search keeps in
        rows ``indices``.

        Args:
            decoder_state: the states list, (N, ...) tensors.
            indices: int (N,) rows to take, each among the rows of its sentence.

        Returns:
            The states list with the recurrent states gathered.
        """
        cell = self.decoder.cell
        cell_states, context = self._split_context(decoder_state)
        parts = cell.unpack_states(cell_states)
        recurrent = [ops.take(s, indices, axis=0) for s in parts.recurrent]
        states = cell.pack_states(parts._replace(recurrent=recurrent))
        if context is None:
            return states
        return [*states, ops.take(context, indices, axis=0)]

    # ----------------------------------------------------------------- config
    # What get_config writes and from_config takes, listed once.
    _CONFIG_KEYS = (
        "name",
        "trainable",
        "source_vocab_size",
        "target_vocab_size",
        "config",
        "seed",
        "dtype",
    )

    def get_config(self):
        values = {
            "config": dataclasses.asdict(self.model_config),
            "dtype": keras.dtype_policies.serialize(self.layers_dtype_policy),
        }
        return {
            key: values[key] if key in values else getattr(self, key)
            for key in self._CONFIG_KEYS
        }

    @classmethod
    def from_config(cls, config):
        # keras.Model swallows unknown keyword arguments: refuse them here, so
        # that an edited or foreign model file fails instead of loading quietly.
        unknown = sorted(set(config) - set(cls._CONFIG_KEYS))
        if unknown:
            raise ValueError(
                f"Seq2Seq got unknown config arguments {unknown}; it takes "
                f"{sorted(cls._CONFIG_KEYS)}. Received: config={config!r}"
            )
        return cls(**config)


def build_seq2seq(
    source_vocab_size: int,
    target_vocab_size: int,
    config: ModelConfig | None = None,
    seed: int | None = None,
    **overrides: Any,
) -> Seq2Seq:
    """Builds the encoder-decoder translation model (a `Seq2Seq`).

    See `Seq2Seq` for the architecture and the decoding API.

    Args:
        source_vocab_size: int, number of source token ids (0 = padding).
        target_vocab_size: int, number of target token ids (0 = padding).
        config: a `ModelConfig`; defaults to ``ModelConfig()``.
        seed: optional int; the dropout seeds derive from it.
        **overrides: `ModelConfig` fields to override (``num_layers=4`` ...).

    Returns:
        A `Seq2Seq` (a functional `keras.Model`) with inputs ``{"source": (B, T)
        int32, "target_in": (B, S) int32}`` and logits ``(B, S,
        target_vocab_size)``. Its `ModelConfig` is ``model.model_config``.

    Example:

    >>> import keras_selfattn
    >>> model = keras_selfattn.build_seq2seq(
    ...     100, 50, num_hiddens=32, num_heads=4, num_layers=1, ffn_hiddens=64,
    ...     decoder_units=32)
    >>> model.output.shape
    (None, None, 50)
    """
    config = ModelConfig(**{**vars(config or ModelConfig()), **overrides})
    return Seq2Seq(source_vocab_size, target_vocab_size, config, seed=seed)
