"""`decode`: a strategy's search, run as the backend runs it best.

JAX: the loop under ``jax.jit``. TensorFlow: a cached ``tf.function`` of the
loop that drops ended sentences, or of its XLA stages (`tensorflow_loops`).
"""

import functools
import weakref

import keras
from keras import ops

from keras_selfattn.decoding import loop
from keras_selfattn.decoding.tensors import (
    executing_eagerly,
    on_tensorflow,
    unconverted,
)
from keras_selfattn.search_settings import check_max_length_ratio

_GRAPHS = weakref.WeakKeyDictionary()  # model -> {graph_key: compiled search}


# Long: mostly its docstring (what each option does, the length cap's rule).
@unconverted
def decode(
    model,
    source_ids,
    strategy,
    max_len,
    jit_compile=False,
    output=None,
    max_length_ratio=None,
):
    """Runs the decoder step by step, choosing tokens with ``strategy``.

    Args:
        model: a `Seq2Seq` (what `build_seq2seq` returns).
        source_ids: int32 (B, T) source ids, 0-padded.
        strategy: a `SearchStrategy` (`GreedySearch`, `BeamSearch`, a subclass).
        max_len: int, the most tokens to produce (the end id included).
        jit_compile: TensorFlow: run the encoder and the loop as XLA
            programs (`tf.function(jit_compile=True)`; what an exported
            ``xla=True`` SavedModel runs, see `keras_selfattn.serving`): the
            loop in stages of fewer and fewer rows
            (`tensorflow_loops.loop_in_xla_stages`), or as one program with
            ``return_attention``. XLA compiles each program once per shape
            (batch size, source length, a stage's rows): pad the sources to a
            few lengths (the export does). JAX: no effect (the search is
            always jitted there).
        output: the search's output layer, a spec bound to ``source_ids``
            once before the loop (``bind(model, source_ids)`` -> a
            `SearchLogits`; ``graph_key()``: hashable, or None for a spec
            whose graph is not cached). None: `WholeVocabulary`, the model's
            own output layer. A vocabulary shortlist with lower-precision
            products is `keras_selfattn.models.output_layer.OutputLayer`.
        max_length_ratio: None (the default: every sentence searched up to
            ``max_len``), or a finite float R > 0: sentence i, whose source has
            n_i tokens (its non-padding ids), is searched for at most
            ``min(max_len, ceil(R * n_i) + LENGTH_CAP_MARGIN)`` steps (the end
            id included; `LENGTH_CAP_MARGIN` = 10: short sources need room
            that a ratio alone does not give). A sentence that reaches its cap
            ends exactly as it would have ended at ``max_len`` had ``max_len``
            been its cap: greedy keeps what it produced (lengths = cap, no end
            id); beam search keeps its K hypotheses as they stand and ranks
            them as ``finish`` does. Then it is dropped from the loop like any
            ended sentence (`loop.length_caps`).

    Returns:
        the strategy's result (see `greedy_decode`, `beam_search_decode`), as
        tensors of the Keras backend.
    """
    source_ids = ops.convert_to_tensor(source_ids, "int32")
    ratio = check_max_length_ratio(max_length_ratio)
    key = _graph_key(strategy, max_len, output, ratio)
    cache = executing_eagerly() and key is not None
    settings = {"max_len": max_len, "output": output, "max_length_ratio": ratio}
    if on_tensorflow():
        from keras_selfattn.decoding import tensorflow_loops

        search = tensorflow_loops.decode_with_xla if jit_compile else decode_now
        if not cache:
            return search(model, source_ids, strategy, **settings)
        search = functools.partial(search, strategy=strategy, **settings)
        key = ("xla", key) if jit_compile else key
        return cached_graph(model, key, search)(source_ids)
    if not cache:
        return decode_now(model, source_ids, strategy, **settings)
    # JAX: the loop is jitted; the trim to the steps taken follows it.
    search = functools.partial(loop.run_loop, strategy=strategy, **settings)
    t, memory = cached_graph(model, key, search)(source_ids)
    return strategy.finish(int(t), memory)


def _graph_key(strategy, max_len, output, max_length_ratio=None):
    """The cached graph's key: the strategy's, with the output spec's and the
    length ratio's (None where the strategy or the spec has none: not cached)."""
    key = strategy.graph_key(max_len)
    if output is not None and key is not None:
        output_key = output.graph_key()
        key = None if output_key is None else (key, type(output), output_key)
    if max_length_ratio is None or key is None:
        return key
    return (key, "max_length_ratio", max_length_ratio)


def decode_now(
    model, source_ids, strategy, max_len, output=None, max_length_ratio=None
):
    """The loop, then the strategy's result.

    TensorFlow: a strategy that can (``drops_finished_rows``) runs
    `tensorflow_loops.loop_dropping_finished`, which stops computing the rows
    of sentences that have ended; the result is the same.
    """
    run = loop.run_loop
    if on_tensorflow() and strategy.drops_finished_rows:
        from keras_selfattn.decoding import tensorflow_loops

        run = tensorflow_loops.loop_dropping_finished
    return strategy.finish(
        *run(model, source_ids, strategy, max_len, output, max_length_ratio)
    )


def cached_graph(model, key, search):
    """The compiled ``search(model, source_ids)`` for ``key``, made once per model.

    TensorFlow: a ``tf.function`` with the input signature (None, None) int32
    (`tensorflow_ops.graph_of`): one trace serves every batch size and source
    length. JAX: `_jitted_search`. The compiled function holds the model
    through a weak reference (the cache is keyed weakly by the model too), so a
    cached graph does not keep the model alive.
    """
    graphs = _GRAPHS.setdefault(model, {})
    if key not in graphs:
        model_ref = weakref.ref(model)
        if on_tensorflow():
            from keras_selfattn.decoding import tensorflow_ops

            graphs[key] = tensorflow_ops.graph_of(model_ref, search)
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
