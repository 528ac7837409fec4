"""The one configuration object of the model; saved as JSON in every run directory."""

import dataclasses
import json
from typing import ClassVar

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
    """

    num_hiddens: int = 128
    num_heads: int = 4
    num_layers: int = 2
    ffn_hiddens: int = 256
    dropout: float = 0.1
    norm_first: bool = False
    decoder_units: int = 128
    decoder_layers: int = 1
    rnn_type: str = "gru"
    attention_score: str = "additive"
    embedding_dim: int = 64
    max_source_len: int = 64
    max_target_len: int = 32
    position: str = "sinusoidal"
    max_relative_position: int = 16

    # The allowed values of the text fields (also the CLI's ``choices``). Literal
    # here, so that the command line parses without importing Keras; a test checks
    # them against the layers' own lists.
    CHOICES: ClassVar[dict] = {
        "rnn_type": ("gru", "lstm"),
        "attention_score": ("additive", "dot", "general", "scaled_dot"),
        "position": POSITIONS,
    }

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, values):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"Unknown ModelConfig fields: {unknown}. Known: {sorted(known)}"
            )
        return cls(**values)

    def __post_init__(self):
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {allowed}. Received: {name}={getattr(self, name)!r}"
                )
        value = self.max_relative_position
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"max_relative_position must be a positive integer. Received: max_relative_position={value}"
            )
