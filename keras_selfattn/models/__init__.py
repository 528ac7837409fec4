"""The seq2seq model builder and its blocks."""

from keras_selfattn.models.blocks import (
    DecoderBridge,
    ScaledTokenEmbedding,
    TransformerEncoderBlock,
)
from keras_selfattn.models.config import ModelConfig
from keras_selfattn.models.seq2seq import MaskedAccuracy, build_seq2seq, masked_loss

__all__ = [
    "DecoderBridge",
    "MaskedAccuracy",
    "ModelConfig",
    "ScaledTokenEmbedding",
    "TransformerEncoderBlock",
    "build_seq2seq",
    "masked_loss",
]
