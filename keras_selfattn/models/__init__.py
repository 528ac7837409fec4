"""The seq2seq model builder and its blocks."""

from keras_selfattn.models.attention_weights import attention_weights_model
from keras_selfattn.models.blocks import (
    DecoderBridge,
    ScaledTokenEmbedding,
    TransformerEncoderBlock,
)
from keras_selfattn.models.config import ModelConfig
from keras_selfattn.models.losses import MaskedAccuracy, MaskedCrossEntropy, masked_loss
from keras_selfattn.models.seq2seq import Seq2Seq, build_seq2seq

__all__ = [
    "DecoderBridge",
    "MaskedAccuracy",
    "MaskedCrossEntropy",
    "ModelConfig",
    "ScaledTokenEmbedding",
    "Seq2Seq",
    "TransformerEncoderBlock",
    "attention_weights_model",
    "build_seq2seq",
    "masked_loss",
]
