"""The public layers. Importing this module registers them for `.keras` loading.

Beside the layers: the masking helpers they use themselves (`valid_lens_to_mask`,
`masked_softmax`, from `keras_selfattn.layers.masking`), and `DecoderCellStates`,
the named layout of a `BahdanauDecoderCell`'s states.
"""

from keras_selfattn.layers.bahdanau_attention import BahdanauAttention
from keras_selfattn.layers.bahdanau_decoder import BahdanauDecoder
from keras_selfattn.layers.bahdanau_decoder_cell import BahdanauDecoderCell
from keras_selfattn.layers.bahdanau_decoder_states import DecoderCellStates
from keras_selfattn.layers.dropout import HashDropout
from keras_selfattn.layers.learned_positional_encoding import LearnedPositionalEncoding
from keras_selfattn.layers.masking import masked_softmax, valid_lens_to_mask
from keras_selfattn.layers.multi_head_self_attention import MultiHeadSelfAttention
from keras_selfattn.layers.positional_encoding import PositionalEncoding

__all__ = [
    "BahdanauAttention",
    "BahdanauDecoder",
    "BahdanauDecoderCell",
    "DecoderCellStates",
    "HashDropout",
    "LearnedPositionalEncoding",
    "MultiHeadSelfAttention",
    "PositionalEncoding",
    "masked_softmax",
    "valid_lens_to_mask",
]
