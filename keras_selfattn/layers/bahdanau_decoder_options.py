"""The constructor options a `BahdanauDecoderCell` and a `BahdanauDecoder` share.

`BahdanauDecoder` takes the same options as its cell, hands them to it and reads
them back from it (as ``keras.layers.GRU`` does with its ``GRUCell``): the cell
checks and keeps them, and both serialize them with `options_config`.
"""

import keras

CELL_OPTIONS = (
    "units",
    "rnn_type",
    "num_layers",
    "dropout",
    "attention_score",
    "attention_heads",
    "kernel_initializer",
    "recurrent_initializer",
    "seed",
    "attentional_output",
    "residual",
    "layer_norm",
)


def options_config(cell):
    """The `CELL_OPTIONS` of ``cell``, serialized for ``get_config``."""
    config = {name: getattr(cell, name) for name in CELL_OPTIONS}
    for name in ("kernel_initializer", "recurrent_initializer"):
        config[name] = keras.initializers.serialize(config[name])
    return config
