"""The reserved token ids and tokens, in one place (no Keras, no TensorFlow import).

Every vocabulary starts with these four tokens, and the model, the data pipeline
and the searches rely on their ids:

| id | token   | role                                                   |
|----|---------|--------------------------------------------------------|
| 0  | `<pad>` | padding; masked (`Embedding(mask_zero=True)`), never predicted |
| 1  | `<unk>` | any token not in the vocabulary                        |
| 2  | `<s>`   | start of a target sequence (the first decoder input)  |
| 3  | `</s>`  | end of a target sequence (a search stops there)       |

`keras_selfattn.text.vocab`, `keras_selfattn.decoding` and `keras_selfattn.models`
import them from here.
"""

__all__ = [
    "END_ID",
    "END_TOKEN",
    "PAD_ID",
    "PAD_TOKEN",
    "RESERVED_TOKENS",
    "START_ID",
    "START_TOKEN",
    "UNK_ID",
    "UNK_TOKEN",
]

PAD_TOKEN = "<pad>"
UNK_TOKEN = "<unk>"
START_TOKEN = "<s>"
END_TOKEN = "</s>"
PAD_ID = 0
UNK_ID = 1
START_ID = 2
END_ID = 3
RESERVED_TOKENS = (PAD_TOKEN, UNK_TOKEN, START_TOKEN, END_TOKEN)
