"""The seq2seq model builder and its blocks.

The names load on first use: ``keras_selfattn.models.config`` (`ModelConfig`)
imports no Keras.
"""

from keras_selfattn._lazy import lazy_package

__all__ = [
    "DecoderBridge",
    "DeepOutput",
    "InverseSquareRootSchedule",
    "MaskedAccuracy",
    "MaskedCrossEntropy",
    "ModelConfig",
    "MovingAverageAdam",
    "ScaledTokenEmbedding",
    "Seq2Seq",
    "TransformerEncoderBlock",
    "attention_weights_model",
    "build_seq2seq",
    "masked_loss",
]

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        "DecoderBridge": "keras_selfattn.models.blocks",
        "DeepOutput": "keras_selfattn.models.blocks",
        "ScaledTokenEmbedding": "keras_selfattn.models.blocks",
        "TransformerEncoderBlock": "keras_selfattn.models.blocks",
        "ModelConfig": "keras_selfattn.models.config",
        "MaskedAccuracy": "keras_selfattn.models.losses",
        "MaskedCrossEntropy": "keras_selfattn.models.losses",
        "masked_loss": "keras_selfattn.models.losses",
        "InverseSquareRootSchedule": "keras_selfattn.models.schedules",
        "MovingAverageAdam": "keras_selfattn.models.optimizers",
        "Seq2Seq": "keras_selfattn.models.seq2seq",
        "build_seq2seq": "keras_selfattn.models.seq2seq",
        "attention_weights_model": "keras_selfattn.models.attention_weights",
    },
    submodules=(
        "attention_weights",
        "blocks",
        "config",
        "losses",
        "optimizers",
        "schedules",
        "saving",
        "seq2seq",
    ),
)
