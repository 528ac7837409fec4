"""keras_selfattn: serializable Keras 3 attention layers, from sentence pairs to TF Serving.

import keras_selfattn as ksa
pe = ksa.layers.PositionalEncoding(num_hiddens=32)
attn = ksa.layers.MultiHeadSelfAttention(num_hiddens=32, num_heads=4)
"""

__version__ = "0.1.0"

from keras_selfattn import layers
from keras_selfattn.models import ModelConfig, build_seq2seq

__all__ = ["ModelConfig", "__version__", "build_seq2seq", "layers"]
