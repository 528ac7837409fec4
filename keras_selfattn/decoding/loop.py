"""The search loop every strategy runs.

`LoopState` is the loop's state; `start`, `keeps_searching` and `stepper` are
its start, condition and body, written once; `iterate` runs a body as one
``keras.ops.while_loop`` (a ``tf.while_loop`` on TensorFlow, a
``lax.while_loop`` on JAX), and `run_loop` is the whole search. The
TensorFlow-only loops that drop the rows of ended sentences run the same start
and body (`tensorflow_loops`), so a sentence's length cap (`length_caps`) holds
in every loop.
"""

import typing

from keras import ops

from keras_selfattn.choices import LENGTH_CAP_MARGIN
from keras_selfattn.decoding.once import before_the_loop
from keras_selfattn.decoding.output import WholeVocabulary
from keras_selfattn.reserved_ids import PAD_ID

# The key of the sentences' (B,) int32 length caps in the loop state's
# ``memory``: the TensorFlow loops gather and write every memory tensor by
# sentence, so the caps follow their sentences through each drop and XLA stage
# with no code of their own. Absent without ``max_length_ratio``; the strategy
# never sees it (`stepper` and the loops' results leave it out).
LENGTH_CAPS = "length_caps"


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


def length_caps(source_ids, max_len, max_length_ratio):
    """int32 (B,): the most steps each sentence is searched for.

    Sentence i, whose source has n_i tokens (its non-padding ids), is searched
    for at most ``min(max_len, ceil(max_length_ratio * n_i) + LENGTH_CAP_MARGIN)``
    steps (the end id included); `LENGTH_CAP_MARGIN` (10, in
    `keras_selfattn.choices`, which the command line reads without Keras) is
    the room a short source needs that a ratio alone does not give. The
    product is computed in float32, on every backend. As OpenNMT-py's
    ``max_length_ratio``, Marian's ``--max-length-factor`` and fairseq's
    ``--max-len-a/--max-len-b`` cap a translation by its source: a sentence
    that repeats itself no longer keeps its batch waiting until ``max_len``.
    """
    tokens = ops.sum(ops.cast(ops.not_equal(source_ids, PAD_ID), "float32"), axis=1)
    caps = ops.cast(ops.ceil(tokens * max_length_ratio), "int32") + LENGTH_CAP_MARGIN
    return ops.minimum(caps, max_len)


def start(model, source_ids, strategy, max_len, max_length_ratio=None):
    """The loop's first `LoopState`: the encoder run, the strategy's start, and
    with ``max_length_ratio`` the sentences' caps in its memory (`LENGTH_CAPS`)."""
    tokens, states, finished, memory = strategy.start(
        model.initial_decoder_state(source_ids), source_ids, max_len
    )
    if max_length_ratio is not None:
        caps = length_caps(source_ids, max_len, max_length_ratio)
        memory = {**memory, LENGTH_CAPS: caps}
    t = ops.convert_to_tensor(0, "int32")
    return LoopState(t, tokens, list(states), finished, memory)


def capped(finished, steps, caps):
    """``finished`` (B,) or (B, K) with every row of a sentence whose ``steps``
    reached its cap (``caps`` (B,)) set: the sentence ends as it would have at
    ``max_len`` had ``max_len`` been its cap (greedy keeps its tokens, no end
    id; a beam keeps its K hypotheses as they stand, ranked by the strategy's
    ``finish``)."""
    reached = ops.greater_equal(steps, caps)
    if len(finished.shape) == 2:
        reached = reached[:, None]
    return ops.logical_or(finished, reached)


def strategy_memory(memory):
    """``memory`` without the loop's `LENGTH_CAPS`: the strategy's own tensors."""
    return {key: value for key, value in memory.items() if key != LENGTH_CAPS}


def keeps_searching(state, max_len):
    """Whether the loop goes on: under ``max_len`` steps, some row searching."""
    return ops.logical_and(state.t < max_len, ops.logical_not(ops.all(state.finished)))


def stepper(model, strategy, output):
    """The loop's body: a `LoopState` -> the next, after one decoder step and
    the strategy's choice over the bound output's logits (`SearchLogits`); a
    sentence that has taken its cap of steps is marked finished (`capped`)."""

    def step(state):
        t, tokens, states, finished, memory = state
        caps = memory.get(LENGTH_CAPS)
        memory = strategy.before_step(model, t, states, strategy_memory(memory))
        log_probs, states = strategy.log_probabilities(model, tokens, states, output)
        tokens, states, finished, memory = strategy.step(
            model, t, log_probs, states, finished, memory, output
        )
        if caps is not None:
            finished = capped(finished, t + 1, caps)
            memory = {**memory, LENGTH_CAPS: caps}
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


def run_loop(model, source_ids, strategy, max_len, output=None, max_length_ratio=None):
    """The loop: start tokens, one decoder step a turn, until all finish or max_len.

    ``output``: the search's output spec (None: the whole vocabulary).
    ``max_length_ratio``: None, or each sentence's cap of steps (`length_caps`).

    Returns:
        ``(t, memory)``: the steps taken and the strategy's tensors.
    """
    bound = bound_output(model, source_ids, output)
    state = start(model, source_ids, strategy, max_len, max_length_ratio)
    step = stepper(model, strategy, bound)
    with before_the_loop(model):
        state = iterate(lambda s: keeps_searching(s, max_len), step, state)
    return state.t, strategy_memory(state.memory)
