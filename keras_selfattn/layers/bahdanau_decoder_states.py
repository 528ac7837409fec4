"""The states list of a `BahdanauDecoderCell`, by name.

A Keras RNN cell takes and returns a flat list of tensors; `DecoderCellStates`
names its parts, and `pack_states` / `unpack_states` turn one into the other, so
that no caller indexes the list. `initial_states` makes the list a decoding
starts from; `state_size` and `states_shape` give its sizes and shapes.

The list is, in order:

1. the recurrent states, layer by layer from the bottom: ``h`` (GRU) or
   ``h, c`` (LSTM), each (B, units): ``num_recurrent_states`` tensors;
2. the memory (B, T, Dm), its key projection ``attention.project_keys(memory)``
   (B, T, Dp), and the memory mask as 0/1 floats (B, T) -- returned unchanged
   by every step;
3. when ``dropout > 0`` and ``num_layers > 1``: one dropout mask (B, units)
   per layer above the first, also constant.

``state_size`` lists, for each state, its size per batch row and time step:
``units`` for the recurrent states and the dropout masks, ``Dm``, ``Dp`` and 1
for the memory, its projection and its mask. (``keras.layers.RNN`` wants ints
there; its symbolic shapes for the three memory states are therefore (B, size),
not (B, T, size): read only the recurrent states from an RNN's returned states.)
"""

import collections

import keras
from keras import ops

from keras_selfattn.layers.dropout import HashDropout
from keras_selfattn.layers.masking import (
    check_valid_lens,
    combine_masks,
    valid_lens_to_mask_for_keys,
)

DecoderCellStates = collections.namedtuple(
    "DecoderCellStates",
    ["recurrent", "memory", "projected_keys", "memory_mask", "dropout_masks"],
)
DecoderCellStates.__doc__ = """The states of a `BahdanauDecoderCell`, by name.

`BahdanauDecoderCell.unpack_states` turns the flat states list (what
``keras.layers.RNN`` and the cell's ``call`` take) into this, and
`BahdanauDecoderCell.pack_states` turns it back; callers never index the list.

Attributes:
    recurrent: list of ``num_recurrent_states`` tensors (B, units), layer by
        layer from the bottom: ``h`` (GRU) or ``h, c`` (LSTM). The only states
        a step changes, and the only ones that differ between the hypotheses
        of one sentence in a beam search.
    memory: (B, T, Dm) the encoder outputs.
    projected_keys: (B, T, Dp) ``attention.project_keys(memory)``; or
        (B, T, 0) in states made from ``keras.Input`` tensors, where every
        step projects the memory itself (see `initial_states`).
    memory_mask: (B, T) 0/1 floats, 1 where a memory position may be attended.
    dropout_masks: list of ``num_dropout_masks`` tensors (B, units).
"""


def check_memory_shape(memory_shape):
    """``memory_shape`` as a tuple, checked to be (batch, length, known dim)."""
    memory_shape = tuple(memory_shape)
    if len(memory_shape) != 3 or memory_shape[-1] is None:
        raise ValueError(
            "memory must have shape (batch, memory_length, memory_dim) with a "
            f"known memory_dim. Received: memory.shape={memory_shape}"
        )
    return memory_shape


def unpack_states(states, num_recurrent_states, num_dropout_masks):
    """The flat states list -> `DecoderCellStates`, its length checked."""
    states = list(states)
    n = num_recurrent_states
    expected = n + 3 + num_dropout_masks
    if len(states) != expected:
        raise ValueError(
            f"states must be a list of {expected} tensors (see "
            "BahdanauDecoderCell.unpack_states). "
            f"Received: {len(states)} tensors"
        )
    return DecoderCellStates(
        recurrent=states[:n],
        memory=states[n],
        projected_keys=states[n + 1],
        memory_mask=states[n + 2],
        dropout_masks=states[n + 3 :],
    )


def pack_states(parts):
    """`DecoderCellStates` -> the flat states list a cell's ``call`` takes."""
    return [
        *parts.recurrent,
        parts.memory,
        parts.projected_keys,
        parts.memory_mask,
        *parts.dropout_masks,
    ]


def initial_states(
    cell, memory, memory_mask, memory_valid_lens, initial_state, training
):
    """The states list of ``cell`` for ``memory``, its keys projected once.

    What `BahdanauDecoderCell.get_initial_state_for_memory` returns (its
    arguments are documented there); ``cell`` is built for the memory already.

    Every tensor made here takes its batch and length from ``memory`` through
    ``*_like`` ops, never from a shape tuple: the memory may be a
    ``keras.Input`` whose batch and length are None (a functional model that
    hands these states to ``keras.layers.RNN(cell, initial_state=...)``), where
    ``ops.zeros((None, units))`` cannot be made.

    Made from symbolic tensors (``keras.Input``), the states call no layer of
    the cell: a functional model would hold that layer twice, at its top and
    inside ``keras.layers.RNN``'s cell, and ``.keras`` saving keeps a layer's
    weights under one of those places only, so the model would not load. The
    key projection is then left to the steps (see `keys_projected_by_steps`),
    and the dropout masks are drawn by a dropout layer of the model's own
    with the cell's rate and seed.
    """
    dtype = cell.compute_dtype
    memory = ops.cast(memory, dtype)
    batch = ops.shape(memory)[0]
    symbolic = _any_symbolic(memory, memory_mask, memory_valid_lens, initial_state)

    length_mask = None
    if memory_valid_lens is not None:
        memory_valid_lens = check_valid_lens(
            memory_valid_lens, batch, name="memory_valid_lens"
        )
        length_mask = valid_lens_to_mask_for_keys(memory_valid_lens, memory)
    mask = combine_masks(length_mask, memory_mask)
    # (B, T) ones: one feature of the memory, every value replaced by 1.
    mask = ops.ones_like(memory[:, :, 0]) if mask is None else ops.cast(mask, dtype)

    if symbolic:
        projected_keys = memory[:, :, :0]  # (B, T, 0): the steps project them
        dropout_layer = HashDropout(
            cell.dropout, seed=cell.seed, dtype=cell.dtype_policy
        )
    else:
        projected_keys = ops.cast(cell.attention.project_keys(memory), dtype)
        dropout_layer = cell.dropout_layer
    # (B, units) zeros: a (B, 1) zero column (from the mask, so that an empty
    # memory, T = 0, has one too) broadcast against a (1, units) row.
    zeros = ops.zeros_like(ops.sum(mask, axis=1, keepdims=True)) + ops.zeros(
        (1, cell.units), dtype=dtype
    )
    recurrent = initial_recurrent_states(cell, initial_state, zeros, dtype)
    dropout_masks = [
        dropout_layer(ops.ones_like(zeros), training=training)
        for _ in range(cell.num_dropout_masks)
    ]
    return pack_states(
        DecoderCellStates(recurrent, memory, projected_keys, mask, dropout_masks)
    )


def keys_projected_by_steps(parts):
    """Whether the states ``parts`` (`DecoderCellStates`) leave the key
    projection to every step: their ``projected_keys`` are (B, T, 0), as
    `initial_states` makes them from symbolic tensors. Known when the step is
    traced (a static size)."""
    return parts.projected_keys.shape[-1] == 0


def _any_symbolic(*values):
    """Whether any tensor in ``values`` (nested) is a ``keras.KerasTensor``."""
    return any(isinstance(v, keras.KerasTensor) for v in keras.tree.flatten(values))


def initial_recurrent_states(cell, initial_state, zeros, dtype):
    """The recurrent states to start from: ``zeros`` (B, units) in every slot,
    or ``initial_state`` checked."""
    count = cell.num_recurrent_states
    if initial_state is None:
        return [zeros for _ in range(count)]
    if not isinstance(initial_state, (list, tuple)):
        initial_state = [initial_state]
    if len(initial_state) != count:
        layout = "h, c" if cell.states_per_layer == 2 else "h"
        raise ValueError(
            f"initial_state must be a list of {count} tensors ({layout} for each "
            f"of the {cell.num_layers} layers, bottom first). "
            f"Received: {len(initial_state)} tensors"
        )
    states = []
    for state in initial_state:
        state = ops.convert_to_tensor(state)
        if len(state.shape) != 2 or state.shape[-1] not in (None, cell.units):
            raise ValueError(
                f"Every initial state must have shape (batch, {cell.units}). "
                f"Received: shape={tuple(state.shape)}"
            )
        states.append(ops.cast(state, dtype))
    return states


def _layout(cell, unit, memory, projected_keys, memory_mask):
    """The states list of ``cell`` with ``unit`` in every recurrent and
    dropout-mask slot."""
    return pack_states(
        DecoderCellStates(
            recurrent=[unit] * cell.num_recurrent_states,
            memory=memory,
            projected_keys=projected_keys,
            memory_mask=memory_mask,
            dropout_masks=[unit] * cell.num_dropout_masks,
        )
    )


def state_size(cell, memory_dim):
    """``cell.state_size``: each state's size (see the module docstring)."""
    if memory_dim is None:
        raise ValueError(
            "The state_size of a BahdanauDecoderCell depends on the memory's "
            "feature size: call get_initial_state_for_memory(memory) or build "
            "the cell (build(inputs_shape, states_shape)) first."
        )
    key_dim = cell.attention.projected_key_size(cell.units, memory_dim)
    return _layout(cell, cell.units, memory_dim, key_dim, 1)


def states_shape(cell, memory_shape):
    """The shapes of ``cell``'s states list for a memory of shape (B, T, Dm)."""
    batch, length, memory_dim = check_memory_shape(memory_shape)
    key_dim = cell.attention.projected_key_size(cell.units, memory_dim)
    return _layout(
        cell,
        (batch, cell.units),
        (batch, length, memory_dim),
        (batch, length, key_dim),
        (batch, length),
    )
