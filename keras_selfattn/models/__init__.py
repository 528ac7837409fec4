"""The seq2seq model builder and its blocks.

Importing it registers the blocks, loss, metric, schedule and optimizer for
``.keras`` loading.
"""

from keras_selfattn.config import ModelConfig
from keras_selfattn.models.attention_weights import attention_weights_model
from keras_selfattn.models.blocks import (
    DecoderBridge,
    DeepOutput,
    ScaledTokenEmbedding,
    TransformerEncoderBlock,
)
from keras_selfattn.models.losses import MaskedAccuracy, MaskedCrossEntropy, masked_loss
from keras_selfattn.models.optimizers import MovingAverageAdam
from keras_selfattn.models.schedules import InverseSquareRootSchedule
from keras_selfattn.models.seq2seq import Seq2Seq, build_seq2seq

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
