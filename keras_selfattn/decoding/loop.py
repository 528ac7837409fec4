"""The search loop every strategy runs.

`LoopState` is the loop's state; `start`, `keeps_searching` and `stepper` are
its start, condition and body, written once; `iterate` runs a body as one
``keras.ops.while_loop`` (a ``tf.while_loop`` on TensorFlow, a
``lax.while_loop`` on JAX), and `run_loop` is the whole search. The
TensorFlow-only loops that drop the rows of ended sentences run the same start
and body (`tensorflow_loops`).
"""

import typing

from keras import ops

from keras_selfattn.decoding.once import before_the_loop
from keras_selfattn.decoding.output import WholeVocabulary


class LoopState(typing.NamedTuple):
    """The search loop's state.

    Attributes:
        t: int32 scalar, the steps taken.
        tokens: int32 (rows,), the tokens the next decoder step reads.
        states: list of the decoder's state tensors, batch-major over the rows.
        finished: bool (B,) or (B, K), whether a row's search has ended.
        memory: dict, the strategy's own tensors.
    """

    t: typing.Any
    tokens: typing.Any
    states: list
    finished: typing.Any
    memory: dict


def start(model, source_ids, strategy, max_len):
    """The loop's first `LoopState`: the encoder run, the strategy's start."""
    tokens, states, finished, memory = strategy.start(
        model.initial_decoder_state(source_ids), source_ids, max_len
    )
    t = ops.convert_to_tensor(0, "int32")
    return LoopState(t, tokens, list(states), finished, memory)


def keeps_searching(state, max_len):
    """Whether the loop goes on: under ``max_len`` steps, some row searching."""
    return ops.logical_and(state.t < max_len, ops.logical_not(ops.all(state.finished)))


def stepper(model, strategy, output):
    """The loop's body: a `LoopState` -> the next, after one decoder step and
    the strategy's choice over the bound output's logits (`SearchLogits`)."""

    def step(state):
        t, tokens, states, finished, memory = state
        memory = strategy.before_step(model, t, states, memory)
        log_probs, states = strategy.log_probabilities(model, tokens, states, output)
        tokens, states, finished, memory = strategy.step(
            model, t, log_probs, states, finished, memory, output
        )
        return LoopState(t + 1, tokens, list(states), finished, memory)

    return step


def iterate(cond, step, state):
    """``step`` applied to the `LoopState` ``state`` while ``cond(state)``, as
    one ``keras.ops.while_loop``."""
    return LoopState(
        *ops.while_loop(
            lambda *s: cond(LoopState(*s)),
            lambda *s: tuple(step(LoopState(*s))),
            tuple(state),
        )
    )


def bound_output(model, source_ids, output):
    """The output spec ``output`` (None: `WholeVocabulary`) bound to the
    request's ``source_ids``: a `SearchLogits`, computed once, before the loop."""
    return (output or WholeVocabulary()).bind(model, source_ids)


def run_loop(model, source_ids, strategy, max_len, output=None):
    """The loop: start tokens, one decoder step a turn, until all finish or max_len.

    ``output``: the search's output spec (None: the whole vocabulary).

    Returns:
        ``(t, memory)``: the steps taken and the strategy's tensors.
    """
    bound = bound_output(model, source_ids, output)
    state = start(model, source_ids, strategy, max_len)
    step = stepper(model, strategy, bound)
    with before_the_loop(model):
        state = iterate(lambda s: keeps_searching(s, max_len), step, state)
    return state.t, state.memory
