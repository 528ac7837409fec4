"""The seq2seq model builder and its blocks.

The names load on first use: ``keras_selfattn.models.config`` (`ModelConfig`)
imports no Keras.
"""

from keras_selfattn._lazy import lazy_package

__all__ = [
    "DecoderBridge",
    "MaskedAccuracy",
    "ModelConfig",
    "ScaledTokenEmbedding",
    "TransformerEncoderBlock",
    "build_seq2seq",
    "masked_loss",
]

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        "DecoderBridge": "keras_selfattn.models.blocks",
        "ScaledTokenEmbedding": "keras_selfattn.models.blocks",
        "TransformerEncoderBlock": "keras_selfattn.models.blocks",
        "ModelConfig": "keras_selfattn.models.config",
        "MaskedAccuracy": "keras_selfattn.models.seq2seq",
        "build_seq2seq": "keras_selfattn.models.seq2seq",
        "masked_loss": "keras_selfattn.models.seq2seq",
    },
    submodules=("blocks", "config", "seq2seq"),
)
