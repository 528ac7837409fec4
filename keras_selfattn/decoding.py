"""Greedy and beam-search decoding of a `build_seq2seq` model, on ``keras.ops``.

One loop, `decode`, runs every search: it runs the encoder once per sentence,
feeds the decoder one token a step (reusing its projected keys), and stops when
every sentence has produced the end id or at ``max_len``, on a whole batch, as
one ``keras.ops.while_loop`` (no Python loop per token, no custom ops). What
differs between searches is a strategy (as OpenNMT-tf's ``dynamic_decode`` takes
a ``DecodingStrategy``): how the loop starts, which tokens a step keeps, and what
the search returns. `GreedySearch` keeps the most likely token, `BeamSearch` the
best ``beam_size`` hypotheses; sampling would be one more strategy, not another
loop. `greedy_decode` and `beam_search_decode` are the two searches by name.

The searches are written with ``keras.ops`` only (as keras-hub's samplers are),
so they run on the TensorFlow and the JAX backend:

- TensorFlow: plain functions of tensors, called eagerly, inside ``tf.function``
  and inside an exported SavedModel (the loop is a ``tf.while_loop``). Called
  eagerly, a search runs as a graph: a ``tf.function`` traced once per model and
  setting (``max_len``, beam size ...) and cached beside the model, for any batch
  and source length: op by op, the eager loop was 20-50x slower
  (benchmarks/RESULTS.md, "What the profile found"). The searches drop the rows
  of sentences whose search has ended from their loop there
  (`_loop_dropping_finished`: the same tokens, less work); with
  ``jit_compile=True`` (XLA, static shapes) they drop them between stages of a
  few row counts (`_loop_in_xla_stages`).
- JAX: the loop (a ``lax.while_loop``) runs under ``jax.jit``, with the model's
  variables passed in as arguments (``keras.StatelessScope``, so a model that
  keeps training decodes with its current weights); one jitted function is
  cached per model and setting, and JAX compiles it once per batch size and
  source length. The result is trimmed to the steps taken after the jitted loop
  (JAX has no dynamic shapes). ``max_len`` and the beam size must be Python
  integers.

Token ids are the package's reserved ids (`keras_selfattn.reserved_ids`): 0 padding,
2 start, 3 end. The searches use only the model's decoding API
(`Seq2Seq.initial_decoder_state`, ``decode_step``, ``decoder_attention``,
``reorder_decoder_state``), never its layer names.
"""

import contextlib
import dataclasses
import functools
import numbers
import weakref

import keras
import numpy as np
from keras import ops

from keras_selfattn.choices import DEFAULT_BEAM_SIZE, DEFAULT_LENGTH_PENALTY
from keras_selfattn.reserved_ids import END_ID, PAD_ID, START_ID

__all__ = [
    "DEFAULT_BEAM_SIZE",
    "DEFAULT_LENGTH_PENALTY",
    "BeamSearch",
    "GreedySearch",
    "beam_search_decode",
    "decode",
    "greedy_decode",
    "length_penalty",
]

# The beam search defaults of every caller (translate, evaluate, the served
# signatures, export): the beam width, and the length normalization strength
# alpha of GNMT's penalty ((5 + length) / 6) ** alpha (Wu et al. 2016 use 0.6).

_NEG = -1e9  # a finite "minus infinity" for log-probabilities (keeps sums NaN-free)

_GRAPHS = weakref.WeakKeyDictionary()  # model -> {graph_key: compiled search}


def _on_tensorflow():
    return keras.config.backend() == "tensorflow"


def _executing_eagerly():
    """False inside a ``tf.function`` trace (TensorFlow); True on other backends."""
    if not _on_tensorflow():
        return True
    import tensorflow as tf

    return tf.executing_eagerly()


def _cached_graph(model, key, search):
    """The compiled ``search(model, source_ids)`` for ``key``, made once per model.

    TensorFlow: a ``tf.function`` with the input signature (None, None) int32: one
    trace serves every batch size and source length. JAX: `_jitted_search`. The
    compiled function holds the model through a weak reference (the cache is
    keyed weakly by the model too), so a cached graph does not keep the model
    alive.
    """
    graphs = _GRAPHS.setdefault(model, {})
    if key not in graphs:
        model_ref = weakref.ref(model)
        if _on_tensorflow():
            import tensorflow as tf

            def run(source_ids):
                return search(model_ref(), source_ids)

            graphs[key] = tf.function(
                run,
                input_signature=[
                    tf.TensorSpec([None, None], tf.int32, name="source_ids")
                ],
                autograph=False,  # an explicit while loop; nothing to convert
            )
        else:
            graphs[key] = _jitted_search(model_ref, search)
    return graphs[key]


def _jitted_search(model_ref, search):
    """``search`` under ``jax.jit``, the model's variables passed as arguments.

    As keras-hub's ``CausalLM`` does on JAX: the variables' current values go in
    as one argument and a ``keras.StatelessScope`` maps them onto the model's
    variables while the search traces, so the compiled function never bakes in
    weights that training changes later.
    """
    import jax

    @jax.jit
    def run(values, source_ids):
        model = model_ref()
        with keras.StatelessScope(state_mapping=zip(model.variables, values)):
            return search(model, source_ids)

    def call(source_ids):
        values = [v.value for v in model_ref().variables]
        return run(values, source_ids)

    return call


class _CastOnce(keras.StatelessScope):
    """TensorFlow: a model's variables read as values cast before the loop.

    Under a mixed policy (``mixed_bfloat16``, ``mixed_float16``) a layer reads
    its float32 variables cast to its compute dtype at every call, so inside the
    decoding loop every step cast every decoder weight again (40% of a bfloat16
    export's op time at batch 32, the output layer's 3,715 x 256 embedding the
    most; benchmarks/RESULTS.md, "float32 against bfloat16"). Here each such
    variable is read and cast once, before the loop; the loop takes the cast
    tensor as an invariant and a read inside it returns that tensor (a
    `keras.StatelessScope`, as the JAX path maps values onto variables). The
    values are those the layers cast
    (this package's layer methods that read a weight outside Keras' autocast
    cast it to their compute dtype themselves), so the results are the same
    bit for bit (tests/test_decoding_graphs.py).

    Args:
        casts: ``(variable, dtype)`` pairs, from `_compute_dtypes`.
    """

    def __init__(self, casts):
        super().__init__()
        self.cast = {id(v): ops.cast(v.value, dtype) for v, dtype in casts}

    def get_current_value(self, variable):
        value = super().get_current_value(variable)  # an update made inside
        if value is None:
            value = self.cast.get(id(variable))
        if value is None and self.original_scope is not None:
            value = self.original_scope.get_current_value(variable)  # nested
        return value


def _compute_dtypes(model):
    """``(variable, dtype)`` of the float variables that every layer owning them
    reads in one compute dtype other than their own (autocast, a mixed policy)."""
    seen = {}
    for layer in model._flatten_layers(include_self=True, recursive=True):
        for variable in layer._trainable_variables + layer._non_trainable_variables:
            own = keras.backend.standardize_dtype(variable._dtype)
            reads = own
            if variable._autocast and "float" in own:
                reads = layer.compute_dtype
            seen.setdefault(id(variable), (variable, own, set()))[2].add(reads)
    return [
        (variable, next(iter(reads)))
        for variable, own, reads in seen.values()
        if len(reads) == 1 and own not in reads
    ]


def _weights_cast_once(model):
    """`_CastOnce` where the model has variables to cast (a mixed policy), else
    nothing."""
    casts = _compute_dtypes(model) if _on_tensorflow() else []
    return _CastOnce(casts) if casts else contextlib.nullcontext()


@contextlib.contextmanager
def _before_the_loop(model):
    """The context a TensorFlow decoding loop is built in: its weights cast
    once (`_CastOnce`), then what the model computes once for its steps (its
    optional ``decoding_invariants()``, `Seq2Seq.decoding_invariants`), from
    those cast weights. Nothing on JAX, whose XLA program hoists by itself."""
    invariants = getattr(model, "decoding_invariants", None)
    if invariants is None or not _on_tensorflow():
        invariants = contextlib.nullcontext
    with _weights_cast_once(model), invariants():
        yield


def _no_padding(model):
    """(V,) float32: ``_NEG`` at the padding id, 0 elsewhere (added to the logits)."""
    return _at_padding(model.target_vocab_size, _NEG, 0.0)


def _at_padding(vocab_size, at_padding, elsewhere):
    """(V,) float32 constant: ``at_padding`` at the padding id, ``elsewhere`` else."""
    values = np.full([vocab_size], elsewhere, "float32")
    values[PAD_ID] = at_padding
    return ops.convert_to_tensor(values)


def _write_column(buffer, t, values):
    """buffer[:, ..., t] = values, as an XLA-friendly masked add on a zero column."""
    column = ops.one_hot(t, ops.shape(buffer)[-1], dtype=buffer.dtype)
    return buffer + ops.expand_dims(values, -1) * column


def _take_per_sentence(values, indices):
    """values[b, indices[b, k], ...] for (B, N, ...) values and (B, K) indices.

    A gather with one batch dimension (``tf.gather(..., batch_dims=1)``) as one
    ``ops.take`` over the (B * N, ...) rows. (``ops.take_along_axis`` broadcasts
    the indices over the trailing axes, which fails on an empty trailing axis: the
    (B, K, 0) ids of a search that took no step, as an empty batch does.)
    """
    shape = ops.shape(values)
    batch, n = shape[0], shape[1]
    rows = indices + n * ops.arange(batch, dtype=indices.dtype)[:, None]
    flat = ops.reshape(values, [batch * n, *shape[2:]])
    taken = ops.take(flat, rows, axis=0)
    if len(taken.shape) != len(values.shape):
        # keras' JAX take from an empty batch loses the indices' axes (a static
        # check: no op in a TensorFlow graph, whose take keeps them).
        taken = ops.reshape(taken, [batch, ops.shape(indices)[1], *shape[2:]])
    return taken


def _argmax_of_rows(values):
    """int32 (R,): the index of each (R, V) row's largest value (the first on ties).

    On TensorFlow ``tf.argmax`` itself: keras' ``ops.argmax`` first replaces
    -0.0 by the smallest negative float (so that +0.0 wins over -0.0 on every
    backend), three more passes over the (R, V) row per decoder step; a
    log-probability is never -0.0 (the largest is ``0 - logsumexp``, +0.0 at
    most), so the tokens are the same.
    """
    if _on_tensorflow():
        import tensorflow as tf

        return tf.argmax(values, axis=-1, output_type=tf.int32)
    return ops.cast(ops.argmax(values, axis=-1), "int32")


def _first_only(width):
    """(width,) bool constant: True at 0 only."""
    values = np.zeros([width], bool)
    values[0] = True
    return ops.convert_to_tensor(values)


# Rows at least this long take the two-level top-k of `_top_k_of_rows`.
_TWO_LEVEL_TOP_K_FROM = 512


def _top_k_of_rows(values, k, size):
    """``ops.top_k(values, k)`` of (R, size) float32 rows, with int32 indices.

    The same values and indices, ties included (the lower index first), but
    without one top-k over the whole row: TensorFlow's CPU top-k took 8 ms for
    the (128, 8000) rows of a beam of 4 at batch 32, several times the output
    layer's matmul. The row is cut into blocks; the k blocks with the largest
    maxima (ties: the lower block) hold the row's k largest values (each block
    passed over has k blocks whose maxima beat all of its values), so one
    top-k runs over the block maxima and one over those k blocks, taken in
    ascending block order so that a tie still goes to the lower index.

    Args:
        values: float32 (R, size).
        k: int, 1 <= k <= size.
        size: int, the rows' static length.
    """
    if size < _TWO_LEVEL_TOP_K_FROM or k * k * 4 > size:
        best, indices = ops.top_k(values, k)
        return best, ops.cast(indices, "int32")
    block = 2 ** int(np.ceil(np.log2(np.sqrt(size / k))))
    blocks = -(-size // block)
    if blocks * block > size:  # pad with a value below every real one
        lowest = float(np.finfo("float32").min)
        values = ops.pad(
            values, [[0, 0], [0, blocks * block - size]], constant_values=lowest
        )
    grouped = ops.reshape(values, [-1, blocks, block])
    _, chosen = ops.top_k(ops.max(grouped, axis=-1), k)
    chosen = ops.sort(ops.cast(chosen, "int32"), axis=-1)  # (R, k) ascending
    candidates = ops.reshape(_take_per_sentence(grouped, chosen), [-1, k * block])
    best, within = ops.top_k(candidates, k)
    within = ops.cast(within, "int32")
    return best, _take_per_sentence(chosen, within // block) * block + within % block


def _keep_shape(new, old):
    """``new`` with the static shape of ``old`` (TensorFlow's loop checks it).

    A gather forgets a static batch size; a ``tf.function`` traced with a fixed
    batch must give the loop back states of the shapes it started with. On JAX
    every shape is static already.
    """
    if not _on_tensorflow():
        return new
    import tensorflow as tf

    return tf.ensure_shape(new, old.shape)


def _graph_key(strategy, key):
    """The two searches by their short keys; a subclass by itself and the key, so
    that its graph never stands in for its parent's (it must be hashable: a frozen
    dataclass is)."""
    return key if type(strategy) in (GreedySearch, BeamSearch) else (strategy, key)


def decode(model, source_ids, strategy, max_len, jit_compile=False):
    """Runs the decoder step by step, choosing tokens with ``strategy``.

    Args:
        model: a `Seq2Seq` (what `build_seq2seq` returns).
        source_ids: int32 (B, T) source ids, 0-padded.
        strategy: a `GreedySearch` or `BeamSearch` (or any object with their
            ``initialize``, ``before_step``, ``step``, ``finalize`` and
            ``graph_key``).
        max_len: int, the most tokens to produce (the end id included).
        jit_compile: TensorFlow: run the encoder and the loop as XLA
            programs (`tf.function(jit_compile=True)`; what an exported
            ``xla=True`` SavedModel runs, see `keras_selfattn.serving`): the
            loop in stages of fewer and fewer rows (`_loop_in_xla_stages`), or
            as one program with ``return_attention``. XLA compiles each
            program once per shape (batch size, source length, a stage's rows):
            pad the sources to a few lengths (the export does). JAX: no effect
            (the search is always jitted there).

    Returns:
        the strategy's result (see `greedy_decode`, `beam_search_decode`), as
        tensors of the Keras backend.
    """
    source_ids = ops.convert_to_tensor(source_ids, "int32")
    key = strategy.graph_key(max_len)
    if jit_compile and _on_tensorflow():
        if _executing_eagerly() and key is not None:
            search = functools.partial(
                _decode_with_xla, strategy=strategy, max_len=max_len
            )
            return _cached_graph(model, ("xla", key), search)(source_ids)
        return _decode_with_xla(model, source_ids, strategy, max_len)
    if _executing_eagerly() and key is not None:
        if _on_tensorflow():
            search = functools.partial(_decode, strategy=strategy, max_len=max_len)
            return _cached_graph(model, key, search)(source_ids)
        # JAX: the loop is jitted; the trim to the steps taken follows it.
        search = functools.partial(_loop, strategy=strategy, max_len=max_len)
        t, memory = _cached_graph(model, key, search)(source_ids)
        return strategy.finalize(int(t), memory)
    return _decode(model, source_ids, strategy, max_len)


def _decode(model, source_ids, strategy, max_len):
    """The loop, then the strategy's result.

    TensorFlow, not under XLA: a strategy that can (``drops_finished_rows``:
    `BeamSearch`, and `GreedySearch` without its attention weights) runs
    `_loop_dropping_finished`, which stops computing the rows of sentences that
    have ended; the result is the same.
    """
    if _on_tensorflow() and getattr(strategy, "drops_finished_rows", False):
        loop = _loop_dropping_finished
    else:
        loop = _loop
    return strategy.finalize(*loop(model, source_ids, strategy, max_len))


def _decode_with_xla(model, source_ids, strategy, max_len):
    """TensorFlow: the loop compiled with XLA, then the strategy's result.

    A strategy that can drop its ended sentences (``drops_finished_rows``) runs
    `_loop_in_xla_stages`; any other runs `_loop` as one XLA program. XLA
    needs static shapes, so the loop returns whole buffers and the trim to the
    steps taken (``finalize``) runs after it, outside the program.
    """
    import tensorflow as tf

    if getattr(strategy, "drops_finished_rows", False):
        return strategy.finalize(
            *_loop_in_xla_stages(model, source_ids, strategy, max_len)
        )
    loop = tf.function(
        functools.partial(_loop, model, strategy=strategy, max_len=max_len),
        jit_compile=True,
        autograph=False,
    )
    return strategy.finalize(*loop(source_ids))


def _loop_in_xla_stages(model, source_ids, strategy, max_len):
    """TensorFlow: `_loop` in XLA programs that drop the ended sentences.

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
    4/3 of the rows its sentences need (or the floor's), where the one XLA
    program of `_loop` computes every row until the batch's longest search
    ends. Each row's arithmetic is `_loop`'s, so the tokens are the same
    (tests/test_decoding_graphs.py; the Multi30k test set, benchmarks/RESULTS.md,
    "the XLA export drops its ended sentences in stages").

    Returns:
        ``(t, memory)`` as `_loop`.
    """
    import tensorflow as tf

    def search_start(ids):
        return strategy.initialize(model.initial_decoder_state(ids), ids, max_len)

    start = tf.function(search_start, jit_compile=True, autograph=False)
    tokens, states, finished, memory = start(source_ids)
    stage = _xla_stage(model, strategy, max_len)

    def body(t, tokens, states, finished, memory, sentences, results):
        t, *searched = stage(t, tokens, states, finished, memory)
        return (t, *_between_stages(t >= max_len, *searched, sentences, results))

    def cond(t, tokens, states, finished, memory, sentences, results):
        return tf.size(sentences) > 0

    sentences = tf.range(tf.shape(finished)[0], dtype=tf.int32)  # -1: a filler
    loop_vars = (tf.constant(0, tf.int32), tokens, list(states), finished, memory)
    loop_vars += (sentences, memory)
    t, *_, results = tf.while_loop(
        cond, body, loop_vars, shape_invariants=_any_batch_invariants(loop_vars)
    )
    return t, results


def _any_batch_invariants(loop_vars):
    """The shape invariants of a loop that drops sentences: ``loop_vars`` are
    ``(t, tokens, states, finished, memory, sentences, results)``; all but the
    step and the batch's ``results`` may change their batch dimension."""
    import tensorflow as tf

    def any_batch(tensor):
        return tf.TensorShape([None]).concatenate(tensor.shape[1:])

    t, *shrinking, results = loop_vars
    return (
        t.shape,
        *tf.nest.map_structure(any_batch, shrinking),
        tf.nest.map_structure(lambda m: m.shape, results),
    )


def _between_stages(at_max_len, tokens, states, finished, memory, sentences, results):
    """After a stage of `_loop_in_xla_stages`: ``results`` with its ended
    sentences written (all, ``at_max_len``), and the others gathered into the
    next stage's rows, filled up with copies of a row marked as ended
    (``sentences`` -1)."""
    import tensorflow as tf

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
    import tensorflow as tf

    rows = _rows_of(taken, tf.shape(tokens)[0] // tf.shape(finished)[0])
    tokens, *states = [tf.gather(x, rows) for x in (tokens, *states)]
    finished, memory, sentences = tf.nest.map_structure(
        lambda x: tf.gather(x, taken), (finished, memory, sentences)
    )
    return tokens, states, finished, memory, sentences


# A stage of `_loop_in_xla_stages` with at most this many decoder rows (a
# sentence's, or a beam's K) runs until its searches end: below it an XLA step's
# products cost about as much at any row count (benchmarks/RESULTS.md, "the XLA
# export drops its ended sentences in stages"), and each further stage costs a
# launch and a gather.
XLA_STAGE_MIN_ROWS = 16


def _xla_stage(model, strategy, max_len):
    """One stage of `_loop_in_xla_stages`, an XLA program: the loop's steps
    until the sentences still searching fit in fewer rows (`_next_stage_rows`;
    only when the stage has more than `XLA_STAGE_MIN_ROWS` decoder rows), none
    is left, or ``max_len``."""
    import tensorflow as tf

    def search_stage(t, tokens, states, finished, memory):
        body = _step(model, strategy)
        sentences = tf.size(_sentence_ended(finished))
        may_shrink = tf.shape(tokens)[0] > XLA_STAGE_MIN_ROWS

        def cond(t, tokens, states, finished, memory):
            searching = tf.reduce_sum(tf.cast(~_sentence_ended(finished), tf.int32))
            shrink = may_shrink & (_next_stage_rows(searching) < sentences)
            return (t < max_len) & (searching > 0) & ~shrink

        with _before_the_loop(model):
            return tf.while_loop(cond, body, (t, tokens, states, finished, memory))

    return tf.function(search_stage, jit_compile=True, autograph=False)


def _next_stage_rows(searching):
    """The rows of the stage after one that left ``searching`` (int32 scalar)
    sentences: the smallest of 1, 2, 3, 4, 6, 8, 12, 16 ... (powers of two and
    three quarters of them) at least as large; 0 for none."""
    import tensorflow as tf

    power = searching - 1  # its highest bit copied into every lower one, plus 1
    for shift in (1, 2, 4, 8, 16):
        power = tf.bitwise.bitwise_or(power, tf.bitwise.right_shift(power, shift))
    power = tf.maximum(power + 1, 0)
    three_quarters = power // 4 * 3
    return tf.where(searching <= three_quarters, three_quarters, power)


def _marked_ended(finished, filler):
    """``finished`` (A,) or (A, K) with the ``filler`` sentences' flags set."""
    import tensorflow as tf

    if finished.shape.rank == 2:
        filler = filler[:, None]
    return tf.logical_or(finished, filler)


def _step(model, strategy):
    """The loop's body: ``(t, tokens, states, finished, memory)`` after one
    decoder step and the strategy's choice."""
    no_padding = _no_padding(model)

    def body(t, tokens, states, finished, memory):
        memory = strategy.before_step(model, t, states, memory)
        logits, states = model.decode_step(tokens, states, training=False)
        log_probs = ops.log_softmax(logits + no_padding)  # padding never chosen
        tokens, states, finished, memory = strategy.step(
            model, t, log_probs, states, finished, memory
        )
        return t + 1, tokens, list(states), finished, memory

    return body


def _loop(model, source_ids, strategy, max_len):
    """The loop: start tokens, one decoder step a turn, until all finish or max_len.

    Returns:
        ``(t, memory)``: the steps taken and the strategy's tensors.
    """
    tokens, states, finished, memory = strategy.initialize(
        model.initial_decoder_state(source_ids), source_ids, max_len
    )
    body = _step(model, strategy)

    def cond(t, tokens, states, finished, memory):
        return ops.logical_and(t < max_len, ops.logical_not(ops.all(finished)))

    with _before_the_loop(model):
        t, _, _, _, memory = ops.while_loop(
            cond,
            body,
            (ops.convert_to_tensor(0, "int32"), tokens, list(states), finished, memory),
        )
    return t, memory


# A batch's ended sentences are dropped from the loop once they are at least this
# share of the sentences still in it (or all of them): each drop copies every
# decoder state tensor, so dropping at every end would cost a copy a step.
DROP_WHEN_ENDED = 0.25


# Long: half of it is the docstring; the loop's body, condition and shape invariants.
def _loop_dropping_finished(model, source_ids, strategy, max_len):
    """TensorFlow: `_loop`, but the decoder runs only on unfinished sentences.

    A batch decodes until its longest search ends; with the static `_loop`
    every step computes every row, and on a served batch of 32 more than half
    of them belong to sentences that have already ended (benchmarks/RESULTS.md,
    "beam search without its ended sentences"). Here the loop carries the
    sentences still searching:
    ``sentences`` (A,) holds their positions in the batch, and the decoder's
    rows (one a sentence, or a beam's K), its state tensors (all batch-major:
    the memory, its keys and mask, the recurrent states) and the strategy's
    tensors hold those sentences alone. The strategy's ``step`` is the static
    loop's: an ended sentence stays as it is there (greedy writes padding at
    no cost; a beam whose K hypotheses have all ended keeps those K), so
    dropping it changes nothing. Once the ended sentences are
    `DROP_WHEN_ENDED` of those in the loop (or all), a ``tf.cond`` writes
    their tensors into the batch's results and gathers the others; the rest
    are written after the loop. The tokens are the static loop's (tested, and
    checked on the 1000 Multi30k test sentences, benchmarks/RESULTS.md, "The
    served translator").

    The batch dimension of the loop's tensors changes from step to step: a
    ``tf.while_loop`` with a ``None`` batch in its shape invariants (not XLA,
    which needs static shapes; JAX and ``jit_compile=True`` run `_loop`).

    Returns:
        ``(t, memory)`` as `_loop`.
    """
    import tensorflow as tf

    tokens, states, finished, memory = strategy.initialize(
        model.initial_decoder_state(source_ids), source_ids, max_len
    )
    results = memory  # the whole batch's, written as its sentences leave
    sentences = tf.range(tf.shape(finished)[0], dtype=tf.int32)
    step = _step(model, strategy)

    def body(t, tokens, states, finished, memory, sentences, results):
        t, tokens, states, finished, memory = step(t, tokens, states, finished, memory)
        ended = _sentence_ended(finished)

        def drop_ended():
            left = _written(results, sentences, memory, ended)
            keep = _positions(tf.logical_not(ended))
            kept = _gathered(keep, tokens, states, finished, memory, sentences)
            return (*kept, left)

        def same():
            return tokens, states, finished, memory, sentences, results

        tokens, states, finished, memory, sentences, results = tf.cond(
            _time_to_drop(ended), drop_ended, same
        )
        return t, tokens, list(states), finished, memory, sentences, results

    def cond(t, tokens, states, finished, memory, sentences, results):
        return tf.logical_and(t < max_len, tf.size(sentences) > 0)

    loop_vars = (tf.constant(0, tf.int32), tokens, list(states), finished, memory)
    loop_vars += (sentences, results)
    with _before_the_loop(model):
        t, _, _, _, memory, sentences, results = tf.while_loop(
            cond, body, loop_vars, shape_invariants=_any_batch_invariants(loop_vars)
        )
    searching = tf.ones(tf.shape(sentences), tf.bool)  # at max_len
    return t, _written(results, sentences, memory, searching)


def _sentence_ended(finished):
    """(A,) whether each sentence's search has ended: its row's flag (greedy),
    or all K of a beam's (B, K)."""
    import tensorflow as tf

    if finished.shape.rank == 1:
        return finished
    return tf.reduce_all(finished, axis=1)


def _time_to_drop(ended):
    """Whether the ended sentences are `DROP_WHEN_ENDED` of ``ended``, or all."""
    import tensorflow as tf

    count = tf.reduce_sum(tf.cast(ended, tf.int32))
    size = tf.size(ended)
    enough = tf.cast(count, tf.float32) >= DROP_WHEN_ENDED * tf.cast(size, tf.float32)
    return tf.logical_and(count > 0, tf.logical_or(enough, count == size))


def _rows_of(sentences, per_sentence):
    """The decoder rows of ``sentences``: ``per_sentence`` consecutive rows each."""
    import tensorflow as tf

    offsets = tf.range(per_sentence, dtype=sentences.dtype)
    return tf.reshape(sentences[:, None] * per_sentence + offsets[None, :], [-1])


def _positions(flags):
    """int32 (N,): the positions of the True entries of the (A,) bool ``flags``."""
    import tensorflow as tf

    return tf.cast(tf.reshape(tf.where(flags), [-1]), tf.int32)


def _written(results, sentences, memory, which):
    """``results`` with the ``which`` rows of ``memory`` written at their
    sentences' positions in the batch."""
    import tensorflow as tf

    chosen = _positions(which)
    positions = tf.gather(sentences, chosen)[:, None]
    return {
        key: tf.tensor_scatter_nd_update(
            value, positions, tf.gather(memory[key], chosen)
        )
        for key, value in results.items()
    }


@dataclasses.dataclass(frozen=True)
class GreedySearch:
    """At each step the most likely next token (`greedy_decode`).

    A strategy of `decode`: ``initialize`` gives the loop's first tokens,
    states, ``finished`` flags and the strategy's own tensors (``memory``);
    ``before_step`` and ``step`` update them around each decoder step;
    ``finalize`` makes the result. ``graph_key`` names the cached graph (None:
    do not cache). ``choose`` picks the tokens: a subclass that samples
    overrides it alone. On TensorFlow (not XLA) and without
    ``return_attention`` the loop drops the rows of finished sentences
    (`_loop_dropping_finished`).

    Args:
        return_attention: also return the attention weights of every step.
    """

    return_attention: bool = False

    @property
    def drops_finished_rows(self):
        """Whether `_loop_dropping_finished` may run this search (TensorFlow):
        not with ``return_attention``, whose weights cover every step of every
        row (after a sentence's end too, as the static loop computes them)."""
        return not self.return_attention

    def graph_key(self, max_len):
        if not isinstance(max_len, numbers.Integral):
            return None
        return _graph_key(self, ("greedy", int(max_len), bool(self.return_attention)))

    def initialize(self, states, source_ids, max_len):
        batch, source_len = ops.shape(source_ids)
        memory = {
            "scores": ops.zeros([batch], "float32"),
            "lengths": ops.zeros([batch], "int32"),
            "ids": ops.zeros([batch, max_len], "int32"),
        }
        if self.return_attention:
            memory["attention"] = ops.zeros([batch, max_len, source_len], "float32")
        tokens = ops.full([batch], START_ID, "int32")
        return tokens, states, ops.zeros([batch], "bool"), memory

    def before_step(self, model, t, states, memory):
        if not self.return_attention:
            return memory
        weights = model.decoder_attention(states)  # (B, T): the step's attention
        column = ops.one_hot(t, ops.shape(memory["attention"])[1])
        attention = memory["attention"] + weights[:, None, :] * column[None, :, None]
        return {**memory, "attention": attention}

    def choose(self, log_probs, t):
        """(B, V) log-probabilities of step ``t`` -> (B,) int32 tokens: the best."""
        return _argmax_of_rows(log_probs)

    def step(self, model, t, log_probs, states, finished, memory):
        next_tokens = self.choose(log_probs, t)
        chosen = _take_per_sentence(log_probs, next_tokens[:, None])[:, 0]
        next_tokens = ops.where(finished, ops.zeros_like(next_tokens), next_tokens)
        memory = {
            **memory,
            "scores": memory["scores"] + ops.where(finished, 0.0, chosen),
            "lengths": memory["lengths"] + ops.cast(ops.logical_not(finished), "int32"),
            "ids": _write_column(memory["ids"], t, next_tokens),
        }
        finished = ops.logical_or(finished, ops.equal(next_tokens, END_ID))
        return next_tokens, states, finished, memory

    def finalize(self, t, memory):
        result = {
            "ids": memory["ids"][:, :t],
            "lengths": memory["lengths"],
            "scores": memory["scores"],
        }
        if self.return_attention:
            result["attention"] = memory["attention"][:, :t]
        return result


def greedy_decode(
    model, source_ids, max_len, return_attention=False, jit_compile=False
):
    """Greedy decoding: at each step the most likely next token.

    Args:
        model: a `Seq2Seq` (what `build_seq2seq` returns).
        source_ids: int32 (B, T) source ids, 0-padded.
        max_len: int, the most tokens to produce (the end id included).
        return_attention: also return the attention weights of every step.
        jit_compile: TensorFlow: one XLA program (see `decode`).

    Returns:
        dict with ``ids`` int32 (B, L) (tokens after the end id are 0),
        ``lengths`` int32 (B,) (tokens up to and including the end id),
        ``scores`` float32 (B,) (sum of the chosen tokens' log-probabilities), and
        with ``return_attention`` ``attention`` float32 (B, L, T).
    """
    if _executing_eagerly() and isinstance(max_len, numbers.Integral):
        max_len, return_attention = int(max_len), bool(return_attention)
    return decode(
        model, source_ids, GreedySearch(return_attention), max_len, jit_compile
    )


def length_penalty(lengths, alpha):
    """GNMT's length normalizer ((5 + length) / 6) ** alpha (Wu et al. 2016)."""
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


@dataclasses.dataclass(frozen=True)
class BeamSearch:
    """The best ``beam_size`` hypotheses, length-normalized at every step.

    A strategy of `decode` (see `GreedySearch` for the methods); what it
    computes is described in `beam_search_decode`. The decoder runs on
    ``B * beam_size`` rows; the states follow their hypotheses through
    ``model.reorder_decoder_state``.

    Args:
        beam_size: int, hypotheses kept per sentence.
        alpha: float, strength of the length normalization (0: none).
    """

    beam_size: int
    alpha: float = DEFAULT_LENGTH_PENALTY
    # A sentence whose K hypotheses have all ended keeps those K at every later
    # step, so `_loop_dropping_finished` may drop it (TensorFlow).
    drops_finished_rows = True

    def __post_init__(self):
        if self.beam_size < 1:
            raise ValueError(
                f"beam_size must be at least 1. Received: beam_size={self.beam_size}"
            )

    def graph_key(self, max_len):
        if not (
            isinstance(max_len, numbers.Integral)
            and isinstance(self.alpha, numbers.Real)
        ):
            return None
        key = ("beam", int(self.beam_size), int(max_len), float(self.alpha))
        return _graph_key(self, key)

    def initialize(self, states, source_ids, max_len):
        batch, k = ops.shape(source_ids)[0], self.beam_size
        states = [ops.repeat(s, k, axis=0) for s in states]  # (B*K, ...)
        first_beam_only = np.full([1, k], _NEG, "float32")
        first_beam_only[0, 0] = 0.0
        memory = {
            "log_probs": ops.tile(ops.convert_to_tensor(first_beam_only), [batch, 1]),
            "lengths": ops.zeros([batch, k], "int32"),
            "ids": ops.zeros([batch, k, max_len], "int32"),
        }
        tokens = ops.full([batch * k], START_ID, "int32")
        return tokens, states, ops.zeros([batch, k], "bool"), memory

    def before_step(self, model, t, states, memory):
        return memory

    def candidate_scores(self, total, lengths, finished):
        """What ranks the (B, K, C) candidates: log-probability over the penalty.

        ``total``: the log-probabilities of each hypothesis' C best
        continuations (C = min(beam size, vocabulary)). Every candidate of a
        hypothesis is one token longer, unless the hypothesis is finished (it
        only continues with free padding). An override must rank the
        candidates of one hypothesis in the order of their log-probability (as
        any per-hypothesis normalization does): the search only forms each
        hypothesis' C best tokens, which then hold every candidate that can
        survive.
        """
        candidate_lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        return total / length_penalty(candidate_lengths, self.alpha)[:, :, None]

    def step(self, model, t, log_probs, states, finished, memory):
        k = self.beam_size
        batch = ops.shape(finished)[0]
        # Only a hypothesis' `width` best tokens can survive: the ranking is
        # monotone in the log-probability within a hypothesis (see
        # `candidate_scores`), so the (B, K, V) candidates are never formed.
        width = min(k, model.target_vocab_size)
        best, tokens = _top_k_of_rows(log_probs, width, model.target_vocab_size)
        best = ops.reshape(best, [batch, k, width])
        tokens = ops.reshape(tokens, [batch, k, width])
        # A finished hypothesis may only continue with padding, at no cost.
        free = _first_only(width)
        finished_3d = finished[:, :, None]
        best = ops.where(finished_3d, ops.where(free, 0.0, _NEG), best)
        tokens = ops.where(ops.logical_and(finished_3d, free), PAD_ID, tokens)
        total = memory["log_probs"][:, :, None] + best  # (B, K, width)
        ranked = self.candidate_scores(total, memory["lengths"], finished)
        _, flat = ops.top_k(ops.reshape(ranked, [batch, k * width]), k)
        flat = ops.cast(flat, "int32")
        parent = flat // width
        next_tokens = _take_per_sentence(ops.reshape(tokens, [batch, k * width]), flat)
        was_finished = _take_per_sentence(finished, parent)
        total = ops.reshape(total, [batch, k * width])
        memory = {
            "log_probs": _take_per_sentence(total, flat),
            "lengths": _take_per_sentence(memory["lengths"], parent)
            + ops.cast(ops.logical_not(was_finished), "int32"),
            "ids": _write_column(
                _take_per_sentence(memory["ids"], parent), t, next_tokens
            ),
        }
        rows = ops.reshape(parent + k * ops.arange(batch, dtype="int32")[:, None], [-1])
        states = [
            _keep_shape(new, old)
            for new, old in zip(model.reorder_decoder_state(states, rows), states)
        ]
        finished = ops.logical_or(was_finished, ops.equal(next_tokens, END_ID))
        return ops.reshape(next_tokens, [-1]), states, finished, memory

    def finalize(self, t, memory):
        log_probs, lengths = memory["log_probs"], memory["lengths"]
        scores = log_probs / length_penalty(lengths, self.alpha)
        # Best first (top_k over all K: what a descending argsort is in TF).
        _, order = ops.top_k(scores, self.beam_size)
        return {
            "ids": _take_per_sentence(memory["ids"][:, :, :t], order),
            "lengths": _take_per_sentence(lengths, order),
            "scores": _take_per_sentence(scores, order),
            "log_probs": _take_per_sentence(log_probs, order),
        }


def beam_search_decode(
    model,
    source_ids,
    beam_size,
    max_len,
    alpha=DEFAULT_LENGTH_PENALTY,
    jit_compile=False,
):
    """Beam search with length normalization applied at every step.

    At each step every kept hypothesis is extended by every token, and the
    ``beam_size`` candidates with the best normalized score
    ``log_prob / length_penalty(length, alpha)`` survive, ``length`` counting the
    candidate's tokens (the end id included), as GNMT (Wu et al. 2016) and
    OpenNMT-tf do. A finished hypothesis is carried on unchanged, with its score.
    Normalizing only after the search would prune long hypotheses by raw
    log-probability before the normalization could help them
    (benchmarks/RESULTS.md, "Beam search: length penalty"). ``alpha=0``: plain
    log-probability, no normalization.

    Args:
        model: a `Seq2Seq` (what `build_seq2seq` returns).
        source_ids: int32 (B, T) source ids, 0-padded.
        beam_size: int, hypotheses kept per sentence.
        max_len: int, the most tokens to produce (the end id included).
        alpha: float, strength of the length normalization.
        jit_compile: TensorFlow: one XLA program (see `decode`).

    Returns:
        dict, best first along axis 1: ``ids`` int32 (B, K, L), ``lengths`` int32
        (B, K), ``scores`` float32 (B, K) (normalized), ``log_probs`` float32 (B, K).
    """
    if (
        _executing_eagerly()
        and isinstance(max_len, numbers.Integral)
        and isinstance(alpha, numbers.Real)
    ):
        max_len, beam_size, alpha = int(max_len), int(beam_size), float(alpha)
    return decode(model, source_ids, BeamSearch(beam_size, alpha), max_len, jit_compile)
