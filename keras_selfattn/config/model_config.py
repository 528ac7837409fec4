"""The one configuration object of the model; saved as JSON in every run directory."""

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from keras_selfattn.choices import RNN_TYPES, SCORES
from keras_selfattn.config.checks import (
    check_choices,
    check_field_types,
    check_known_keys,
    check_range,
)

POSITIONS = ("sinusoidal", "learned", "relative", "rotary")


@dataclasses.dataclass
class ModelConfig:
    """Hyperparameters of `build_seq2seq`.

    Attributes:
        num_hiddens: width of the encoder (embeddings, attention, residual stream).
        num_heads: attention heads per encoder block; divides ``num_hiddens``.
        num_layers: number of self-attention encoder blocks.
        ffn_hiddens: hidden width of each block's position-wise feed-forward network.
        dropout: dropout rate in the encoder blocks and the decoder.
        norm_first: pre-layer-norm blocks when True, post-layer-norm (the original
            Transformer and d2l) when False.
        decoder_units: hidden size of the Bahdanau decoder's recurrent cell.
        decoder_layers: stacked recurrent layers in the decoder.
        rnn_type: ``"gru"`` or ``"lstm"``.
        attention_score: ``"additive"`` (Bahdanau) or a Luong variant
            (``"dot"``, ``"general"``, ``"scaled_dot"``).
        embedding_dim: width of the target-token embedding fed to the decoder.
        max_source_len: longest source (tokens) the model accepts; sets the size of
            the positional table. Longer sources are truncated by the data pipeline.
        max_target_len: longest target (tokens, without start/end) decoded.
        position: how the encoder knows token order: ``"sinusoidal"`` (the fixed
            table added to the embeddings), ``"learned"`` (a trainable table of
            ``max_source_len`` rows), ``"relative"`` (learned key/value embeddings of
            the clipped offset ``j - i`` inside every self-attention, Shaw et al.
            2018) or ``"rotary"`` (queries and keys rotated by position, Su et al.
            2021). The last two add nothing to the embeddings.
        max_relative_position: with ``position="relative"``, offsets beyond this
            share one embedding.
        attentional_output: the decoder's output is Luong's attentional vector
            ``tanh(W [h_t; c_t])`` (the recurrent state and the attention context
            it reads), so the output layer sees the source directly.
        decoder_residual: residual connections between stacked decoder layers.
        decoder_layer_norm: layer-normalized inputs of stacked decoder layers.
        attention_heads: heads of the decoder's additive attention (RNMT+'s
            multi-head additive attention); divides ``decoder_units`` and
            ``num_hiddens``.
        tie_embeddings: the target embedding is also the output layer (one
            matrix, Press & Wolf 2017); needs ``embedding_dim ==
            decoder_units``.
        deep_output_hiddens: hidden width of a deep output (`DeepOutput`: a
            pre-layer-norm residual feed-forward network between the decoder's
            output and the output layer, Bahdanau et al. 2015's "deep output");
            0: none (the decoder's output goes straight to the output layer).
    """

    num_hiddens: int = 128
    num_heads: int = 4
    num_layers: int = 2
    ffn_hiddens: int = 256
    dropout: float = 0.1
    norm_first: bool = True
    decoder_units: int = 128
    decoder_layers: int = 1
    rnn_type: str = "gru"
    attention_score: str = "additive"
    embedding_dim: int = 64
    max_source_len: int = 64
    max_target_len: int = 32
    position: str = "sinusoidal"
    max_relative_position: int = 16
    attentional_output: bool = True
    decoder_residual: bool = True
    decoder_layer_norm: bool = True
    attention_heads: int = 1
    tie_embeddings: bool = False
    deep_output_hiddens: int = 0

    # The allowed values of the text fields (also the CLI's ``choices``).
    CHOICES: ClassVar[dict] = {
        "rnn_type": RNN_TYPES,
        "attention_score": SCORES,
        "position": POSITIONS,
    }

    # Fields added after runs were first saved, with the value that gives the
    # architecture those runs had: a config.json or .keras file without the
    # field loads as it was trained.
    ADDED_LATER: ClassVar[dict[str, Any]] = {
        "attentional_output": False,
        "decoder_residual": False,
        "decoder_layer_norm": False,
    }

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(
        cls, values: Mapping[str, Any], source: str = "ModelConfig"
    ) -> "ModelConfig":
        """A `ModelConfig` from a dict (``config.json``'s ``"model"``).

        Unknown keys are refused (the error names ``source``); a missing key takes
        its default, so configurations saved before a field existed still load
        (a field in ``ADDED_LATER`` takes the value that rebuilds what they were).
        """
        check_known_keys(cls, values, source)
        return cls(**{**cls.ADDED_LATER, **values})

    def __post_init__(self) -> None:
        check_field_types(self)
        check_choices(self)
        for name in (
            "num_hiddens",
            "num_heads",
            "ffn_hiddens",
            "decoder_units",
            "decoder_layers",
            "embedding_dim",
            "max_source_len",
            "max_target_len",
            "max_relative_position",
            "attention_heads",
        ):
            check_range(self, name, minimum=1)
        check_range(self, "num_layers", minimum=0)
        check_range(self, "deep_output_hiddens", minimum=0)
        check_range(self, "dropout", minimum=0, below=1)
        self._check_divisible("decoder_units", "attention_heads")
        self._check_divisible("num_hiddens", "attention_heads")
        if self.tie_embeddings and self.embedding_dim != self.decoder_units:
            raise ValueError(
                "tie_embeddings needs embedding_dim == decoder_units (the decoder's "
                "outputs are scored against the embeddings): set both to one width, "
                "or turn tying off (--no-tie-embeddings; --preset small ties "
                f"them). Received: embedding_dim={self.embedding_dim}, "
                f"decoder_units={self.decoder_units}"
            )
        self._check_divisible("num_hiddens", "num_heads")

    def _check_divisible(self, name: str, by: str) -> None:
        if getattr(self, name) % getattr(self, by):
            raise ValueError(
                f"{name} must be divisible by {by}. Received: "
                f"{name}={getattr(self, name)}, {by}={getattr(self, by)}"
            )
