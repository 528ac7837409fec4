"""TensorFlow's own ways to run the search loop.

On TensorFlow a search's loop drops the rows of sentences whose search has
ended (`loop_dropping_finished`: the same tokens, less work); compiled with XLA
(static shapes) it drops them between stages of a few row counts
(`loop_in_xla_stages`). Both run the loop's start and body
(`keras_selfattn.decoding.loop`).
"""

import functools

import tensorflow as tf

from keras_selfattn.decoding import loop
from keras_selfattn.decoding.loop import LoopState
from keras_selfattn.decoding.once import before_the_loop
from keras_selfattn.decoding.tensorflow_ops import size_bucket

# A batch's ended sentences are dropped from the loop once they are at least this
# share of the sentences still in it (or all of them): each drop copies every
# decoder state tensor, so dropping at every end would cost a copy a step.
DROP_WHEN_ENDED = 0.25

# A stage of `loop_in_xla_stages` with at most this many decoder rows (a
# sentence's, or a beam's K) runs until its searches end: below it an XLA step's
# products cost about as much at any row count (benchmarks/RESULTS.md, "the XLA
# export drops its ended sentences in stages"), and each further stage costs a
# launch and a gather.
XLA_STAGE_MIN_ROWS = 16


def decode_with_xla(
    model, source_ids, strategy, max_len, output=None, max_length_ratio=None
):
    """The loop compiled with XLA, then the strategy's result.

    A strategy that can drop its ended sentences (``drops_finished_rows``) runs
    `loop_in_xla_stages`; any other runs `loop.run_loop` as one XLA program.
    XLA needs static shapes, so the loop returns whole buffers and the trim to
    the steps taken (``finish``) runs after it, outside the program.
    """
    settings = {
        "max_len": max_len,
        "output": output,
        "max_length_ratio": max_length_ratio,
    }
    if strategy.drops_finished_rows:
        return strategy.finish(
            *loop_in_xla_stages(model, source_ids, strategy, **settings)
        )
    compiled = tf.function(
        functools.partial(loop.run_loop, model, strategy=strategy, **settings),
        jit_compile=True,
        autograph=False,
    )
    return strategy.finish(*compiled(source_ids))


def _while_sentences_left(cond, body, state, sentences, results):
    """``tf.while_loop`` over ``(*state, sentences, results)`` whose batch
    dimension may change from turn to turn (all but ``t`` and ``results``).

    ``cond`` and ``body`` take and return ``(state, sentences, results)``.
    """

    def any_batch(tensor):
        return tf.TensorShape([None]).concatenate(tensor.shape[1:])

    loop_vars = (*state, sentences, results)
    invariants = (
        state.t.shape,
        *tf.nest.map_structure(any_batch, (*state[1:], sentences)),
        tf.nest.map_structure(lambda m: m.shape, results),
    )

    def unpacked(function):
        return lambda *v: function(LoopState(*v[:5]), v[5], v[6])

    def flat_body(state, sentences, results):
        state, sentences, results = body(state, sentences, results)
        return (*state, sentences, results)

    *state, sentences, results = tf.while_loop(
        unpacked(cond), unpacked(flat_body), loop_vars, shape_invariants=invariants
    )
    return LoopState(*state), sentences, results


def loop_dropping_finished(
    model, source_ids, strategy, max_len, output=None, max_length_ratio=None
):
    """`loop.run_loop`, but the decoder runs only on unfinished sentences.

    A batch decodes until its longest search ends; with the static loop every
    step computes every row, and on a served batch of 32 more than half of them
    belong to sentences that have already ended (benchmarks/RESULTS.md, "beam
    search without its ended sentences"). Here the loop carries the
    sentences still searching: ``sentences`` (A,) holds their positions in the
    batch, and the decoder's rows (one a sentence, or a beam's K), its state
    tensors (all batch-major) and the strategy's tensors hold those sentences
    alone. The strategy's ``step`` is the static loop's: an ended sentence stays
    as it is there (``drops_finished_rows``), so dropping it changes nothing.
    The steps run in an inner loop that stops once the ended sentences are
    `DROP_WHEN_ENDED` of those in it (or all); the outer loop's turn then
    writes their tensors into the batch's results and gathers the others, and
    the rest are written after the loop. The outer loop's ``sentences`` and
    results are no loop variables of the steps, and no ``tf.cond`` runs at
    each step (fewer ops a step, the same speed: benchmarks/RESULTS.md,
    "Served precision and shortlist"). Not under XLA,
    which needs static shapes. With ``max_length_ratio`` the sentences' caps
    are a memory tensor (`loop.LENGTH_CAPS`), gathered and written with the
    rest, so each keeps its own.

    Returns:
        ``(t, memory)`` as `loop.run_loop`.
    """
    bound = loop.bound_output(model, source_ids, output)
    state = loop.start(model, source_ids, strategy, max_len, max_length_ratio)
    step = loop.stepper(model, strategy, bound)

    def until_time_to_drop(state):
        ended = _sentence_ended(state.finished)
        return tf.logical_and(state.t < max_len, tf.logical_not(_time_to_drop(ended)))

    def body(state, sentences, results):
        state = loop.iterate(until_time_to_drop, step, state)
        ended = _sentence_ended(state.finished)
        left = _written(results, sentences, state.memory, ended)
        keep = _positions(tf.logical_not(ended))
        tokens, states, finished, memory, sentences = _gathered(
            keep, *state[1:], sentences
        )
        return LoopState(state.t, tokens, states, finished, memory), sentences, left

    def cond(state, sentences, results):
        return tf.logical_and(state.t < max_len, tf.size(sentences) > 0)

    sentences = tf.range(tf.shape(state.finished)[0], dtype=tf.int32)
    with before_the_loop(model):
        state, sentences, results = _while_sentences_left(
            cond, body, state, sentences, state.memory
        )
    searching = tf.ones(tf.shape(sentences), tf.bool)  # at max_len
    results = _written(results, sentences, state.memory, searching)
    return state.t, loop.strategy_memory(results)


def loop_in_xla_stages(
    model, source_ids, strategy, max_len, output=None, max_length_ratio=None
):
    """`loop.run_loop` in XLA programs that drop the ended sentences.

    One XLA program runs the encoder and the strategy's start. Then the
    search runs in stages, each an XLA program of static shapes
    (`_xla_stage`): a stage steps its rows until the sentences still
    searching fit in fewer rows (or until ``max_len``; a stage of at most
    `XLA_STAGE_MIN_ROWS` decoder rows runs to the end). Between stages,
    plain TensorFlow writes the ended sentences into the batch's results and
    gathers those still searching into the next stage's rows: 1, 2, 3, 4, 6,
    8, 12 ... (`_next_stage_rows`), filled up with copies of a row marked as
    ended, so that XLA compiles a few row counts per batch size and source
    length, not one per count. Each stage after the first computes at most
    4/3 of the rows its sentences need (or the floor's), where one XLA program
    of the whole loop computes every row until the batch's longest search
    ends. Each row's arithmetic is the static loop's, so the tokens are the same
    (tests/test_decoding_graphs.py; benchmarks/RESULTS.md, "the XLA export drops
    its ended sentences in stages"). With ``max_length_ratio`` the sentences'
    caps travel in the memory (`loop.LENGTH_CAPS`) through every gather and
    write between stages; a filler row copies its source row's cap and is
    marked as ended.

    Returns:
        ``(t, memory)`` as `loop.run_loop`.
    """

    def search_start(ids):
        return loop.start(model, ids, strategy, max_len, max_length_ratio)

    start = tf.function(search_start, jit_compile=True, autograph=False)
    state = start(source_ids)
    # Bound outside the programs: each stage takes its tensors as captures.
    bound = loop.bound_output(model, source_ids, output)
    stage = _xla_stage(model, strategy, max_len, bound)

    def body(state, sentences, results):
        t, *searched = stage(*state)
        between = _between_stages(t >= max_len, *searched, sentences, results)
        return LoopState(t, *between[:4]), *between[4:]

    def cond(state, sentences, results):
        return tf.size(sentences) > 0

    sentences = tf.range(tf.shape(state.finished)[0], dtype=tf.int32)  # -1: filler
    state = LoopState(tf.constant(0, tf.int32), *state[1:])
    state, _, results = _while_sentences_left(
        cond, body, state, sentences, state.memory
    )
    return state.t, loop.strategy_memory(results)


def _sentence_ended(finished):
    """(A,) whether each sentence's search has ended: its row's flag (greedy),
    or all K of a beam's (B, K)."""
    if finished.shape.rank == 1:
        return finished
    return tf.reduce_all(finished, axis=1)


def _time_to_drop(ended):
    """Whether the ended sentences are `DROP_WHEN_ENDED` of ``ended``, or all."""
    count = tf.reduce_sum(tf.cast(ended, tf.int32))
    size = tf.size(ended)
    enough = tf.cast(count, tf.float32) >= DROP_WHEN_ENDED * tf.cast(size, tf.float32)
    return tf.logical_and(count > 0, tf.logical_or(enough, count == size))


def _rows_of(sentences, per_sentence):
    """The decoder rows of ``sentences``: ``per_sentence`` consecutive rows each."""
    offsets = tf.range(per_sentence, dtype=sentences.dtype)
    return tf.reshape(sentences[:, None] * per_sentence + offsets[None, :], [-1])


def _positions(flags):
    """int32 (N,): the positions of the True entries of the (A,) bool ``flags``."""
    return tf.cast(tf.reshape(tf.where(flags), [-1]), tf.int32)


def _written(results, sentences, memory, which):
    """``results`` with the ``which`` rows of ``memory`` written at their
    sentences' positions in the batch."""
    chosen = _positions(which)
    positions = tf.gather(sentences, chosen)[:, None]
    return {
        key: tf.tensor_scatter_nd_update(
            value, positions, tf.gather(memory[key], chosen)
        )
        for key, value in results.items()
    }


def _between_stages(at_max_len, tokens, states, finished, memory, sentences, results):
    """After a stage of `loop_in_xla_stages`: ``results`` with its ended
    sentences written (all, ``at_max_len``), and the others gathered into the
    next stage's rows, filled up with copies of a row marked as ended
    (``sentences`` -1)."""
    done = tf.logical_or(_sentence_ended(finished), at_max_len)
    results = _written(results, sentences, memory, done & (sentences >= 0))
    searching = _positions(~done)
    count = tf.size(searching)
    taken = tf.pad(searching, [[0, _next_stage_rows(count) - count]])  # row 0 fills
    filler = tf.range(tf.size(taken)) >= count
    tokens, states, finished, memory, sentences = _gathered(
        taken, tokens, states, finished, memory, sentences
    )
    finished = _marked_ended(finished, filler)
    sentences = tf.where(filler, -1, sentences)
    return tokens, states, finished, memory, sentences, results


def _gathered(taken, tokens, states, finished, memory, sentences):
    """The loop's tensors of the sentences at positions ``taken`` (A',): their
    decoder rows (one a sentence, or a beam's K) of ``tokens`` and ``states``,
    and their entries of the others."""
    rows = _rows_of(taken, tf.shape(tokens)[0] // tf.shape(finished)[0])
    tokens, *states = [tf.gather(x, rows) for x in (tokens, *states)]
    finished, memory, sentences = tf.nest.map_structure(
        lambda x: tf.gather(x, taken), (finished, memory, sentences)
    )
    return tokens, states, finished, memory, sentences


def _xla_stage(model, strategy, max_len, output):
    """One stage of `loop_in_xla_stages`, an XLA program: the loop's steps
    until the sentences still searching fit in fewer rows (`_next_stage_rows`;
    only when the stage has more than `XLA_STAGE_MIN_ROWS` decoder rows), none
    is left, or ``max_len``."""

    def search_stage(t, tokens, states, finished, memory):
        step = loop.stepper(model, strategy, output)
        sentences = tf.size(_sentence_ended(finished))
        may_shrink = tf.shape(tokens)[0] > XLA_STAGE_MIN_ROWS

        def cond(state):
            searching = tf.reduce_sum(
                tf.cast(~_sentence_ended(state.finished), tf.int32)
            )
            shrink = may_shrink & (_next_stage_rows(searching) < sentences)
            return (state.t < max_len) & (searching > 0) & ~shrink

        state = LoopState(t, tokens, states, finished, memory)
        with before_the_loop(model):
            return tuple(loop.iterate(cond, step, state))

    return tf.function(search_stage, jit_compile=True, autograph=False)


def _next_stage_rows(searching):
    """The rows of the stage after one that left ``searching`` (int32 scalar)
    sentences: the smallest of 1, 2, 3, 4, 6, 8, 12, 16 ... at least as large
    (`tensorflow_ops.size_bucket`); 0 for none."""
    return size_bucket(searching)


def _marked_ended(finished, filler):
    """``finished`` (A,) or (A, K) with the ``filler`` sentences' flags set."""
    if finished.shape.rank == 2:
        filler = filler[:, None]
    return tf.logical_or(finished, filler)
