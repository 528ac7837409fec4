"""The one configuration object of the model; saved as JSON in every run directory."""

import dataclasses
import json


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

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, values):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown ModelConfig fields: {unknown}. Known: {sorted(known)}")
        return cls(**values)
