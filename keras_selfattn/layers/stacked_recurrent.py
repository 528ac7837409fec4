"""The stacked recurrent layers of a `BahdanauDecoderCell`, and its deep output.

RNMT+ stacks its recurrent layers with a layer-normalized input and a residual
connection for every layer above the first; Luong et al. 2015 turn a step's
output and its context into one attentional vector. The cell keeps the
sublayers (and so their weights); these functions make them and run them.
"""

import keras
from keras import ops

from keras_selfattn.layers.arguments import clone_initializer


def make_rnn_cells(
    rnn_type, units, num_layers, kernel_initializer, recurrent_initializer, dtype
):
    """``num_layers`` GRU or LSTM cells, named ``{rnn_type}_cell_{i}``."""
    cell_class = keras.layers.GRUCell if rnn_type == "gru" else keras.layers.LSTMCell
    return [
        cell_class(
            units,
            kernel_initializer=clone_initializer(kernel_initializer),
            recurrent_initializer=clone_initializer(recurrent_initializer),
            dtype=dtype,
            name=f"{rnn_type}_cell_{i}",
        )
        for i in range(num_layers)
    ]


def make_layer_norms(num_layers, layer_norm, dtype):
    """The normalizations of the inputs of the layers above the first (if any)."""
    return [
        keras.layers.LayerNormalization(
            epsilon=1e-5, dtype=dtype, name=f"layer_norm_{i}"
        )
        for i in range(1, num_layers if layer_norm else 1)
    ]


def make_attentional_output(units, kernel_initializer, dtype):
    """The deep output's ``tanh(W_c [h_t; c_t])`` projection."""
    return keras.layers.Dense(
        units,
        activation="tanh",
        kernel_initializer=clone_initializer(kernel_initializer),
        dtype=dtype,
        name="attentional_output",
    )


def run_stack(cell, x, parts, training=None):
    """One step of ``cell``'s stacked layers on the input ``x``.

    Every layer above the first takes the previous layer's output, normalized
    (``layer_norm``), times its dropout mask, and adds its output to it
    (``residual``). Returns ``(output, new recurrent states)``.
    """
    per_layer = cell.states_per_layer
    new_recurrent = []
    for i, rnn_cell in enumerate(cell.rnn_cells):
        layer_input = x
        if i > 0 and cell.layer_norms:
            layer_input = cell.layer_norms[i - 1](layer_input)
        if i > 0 and parts.dropout_masks:
            layer_input = layer_input * ops.cast(parts.dropout_masks[i - 1], x.dtype)
        layer_states = parts.recurrent[i * per_layer : (i + 1) * per_layer]
        output, layer_new = rnn_cell(layer_input, layer_states, training=training)
        x = x + output if i > 0 and cell.residual else output
        new_recurrent.extend(layer_new)
    return x, new_recurrent


def stack_output(hidden, residual):
    """What the stack carried out of a step, from every layer's ``h``.

    The top layer's ``h``; with ``residual`` stacking, the sum of them all.
    """
    if not residual:
        return hidden[-1]
    output = hidden[0]
    for h in hidden[1:]:
        output = output + h
    return output
