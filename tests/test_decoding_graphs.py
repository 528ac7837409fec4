"""The searches as graphs: eager calls reuse one cached graph; fixed shapes trace
too."""

import gc
import itertools
import weakref

import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn.decoding import (
    beam_search_decode,
    greedy_decode,
    loop,
    search,
    tensorflow_loops,
)
from tests.test_decoding import SOURCE, tiny_model


def test_eager_calls_share_one_graph_per_setting():
    model = tiny_model()
    first = greedy_decode(model, SOURCE, 6)
    greedy_decode(model, SOURCE[:1, :3], 6)  # another batch size and source length
    beam_search_decode(model, SOURCE, 3, 6)
    beam_search_decode(model, SOURCE[:2], 3, 6)
    graphs = search._GRAPHS[model]
    assert sorted(graphs) == [("beam", 3, 6, 0.6), ("greedy", 6, False)]
    assert all(len(g._list_all_concrete_functions()) == 1 for g in graphs.values())
    traced = tf.function(lambda s: greedy_decode(model, s, 6))(tf.constant(SOURCE))
    np.testing.assert_array_equal(first["ids"].numpy(), traced["ids"].numpy())
    np.testing.assert_allclose(
        first["scores"].numpy(), traced["scores"].numpy(), atol=1e-6
    )


@pytest.mark.slow
def test_searches_trace_with_a_fixed_batch_size():
    """A tf.function traced on a concrete (B, T) input: the beam's gathered states keep
    (B*K, units)."""
    model = tiny_model()
    source = tf.constant(SOURCE)
    beam = tf.function(lambda s: beam_search_decode(model, s, 3, 6)["ids"])(source)
    greedy = tf.function(lambda s: greedy_decode(model, s, 6)["ids"])(source)
    assert beam.shape[:2] == (3, 3)
    np.testing.assert_array_equal(
        beam.numpy(), beam_search_decode(model, SOURCE, 3, 6)["ids"].numpy()
    )
    np.testing.assert_array_equal(
        greedy.numpy(), greedy_decode(model, SOURCE, 6)["ids"].numpy()
    )


def test_a_callers_tf_function_converts_none_of_the_search(monkeypatch):
    """Inside a caller's ``tf.function`` with autograph on (its default) the
    searches run unconverted, as the package's own graphs trace them: autograph
    rewrites none of the package's Python (seconds on the first trace in a
    process), and the results are those of the package's own graph."""
    from tensorflow.python.autograph.impl import api as autograph_api

    from keras_selfattn.decoding import search_with
    from keras_selfattn.search_settings import SearchSettings

    converted = []
    convert = autograph_api._convert_actual

    def recording(entity, program_ctx):
        converted.append(f"{entity.__module__}.{entity.__qualname__}")
        return convert(entity, program_ctx)

    monkeypatch.setattr(autograph_api, "_convert_actual", recording)
    model = tiny_model()
    searches = {
        "greedy": lambda source: greedy_decode(model, source, 6),
        "beam": lambda source: beam_search_decode(model, source, 3, 6),
        "by settings": lambda source: search_with(
            model, source, SearchSettings(beam_size=3), 6
        ),
    }
    for name, run in searches.items():
        got = tf.function(run)(tf.constant(SOURCE))
        own = run(SOURCE)  # eager: the package's own cached graph
        np.testing.assert_array_equal(got["ids"].numpy(), own["ids"].numpy(), name)
    assert len(converted) == len(searches), converted  # the callers' lambdas alone
    assert not [name for name in converted if name.startswith("keras_selfattn")]


def test_cached_graphs_do_not_keep_the_model_alive():
    model = tiny_model()
    greedy_decode(model, SOURCE, 4)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None


@pytest.mark.slow
def test_searches_compiled_with_xla_give_the_same_results():
    """``jit_compile=True``: the encoder and the loop as one XLA program (what an
    ``xla=True`` export runs), traced and eager: the same ids as the plain graph,
    scores and attention close."""
    from tests.test_decoding import sharpened_model

    model = sharpened_model()
    plain = greedy_decode(model, SOURCE, 6, return_attention=True)
    compiled = tf.function(
        lambda s: greedy_decode(model, s, 6, return_attention=True, jit_compile=True)
    )(tf.constant(SOURCE))
    eager = greedy_decode(model, SOURCE, 6, return_attention=True, jit_compile=True)
    for result in (compiled, eager):
        np.testing.assert_array_equal(result["ids"].numpy(), plain["ids"].numpy())
        np.testing.assert_array_equal(
            result["lengths"].numpy(), plain["lengths"].numpy()
        )
        np.testing.assert_allclose(
            result["scores"].numpy(), plain["scores"].numpy(), atol=1e-5
        )
        assert result["attention"].shape == plain["attention"].shape
        np.testing.assert_allclose(
            result["attention"].numpy(), plain["attention"].numpy(), atol=1e-5
        )
    beam = beam_search_decode(model, SOURCE, 3, 6)
    beam_xla = tf.function(
        lambda s: beam_search_decode(model, s, 3, 6, jit_compile=True)
    )(tf.constant(SOURCE))
    np.testing.assert_array_equal(beam_xla["ids"].numpy(), beam["ids"].numpy())
    np.testing.assert_allclose(
        beam_xla["scores"].numpy(), beam["scores"].numpy(), atol=1e-5
    )
    assert ("xla", ("greedy", 6, True)) in search._GRAPHS[model]


def _loop_functions(function):
    """The nested functions (loop bodies and conds) of ``function``'s graph on
    `SOURCE`: the function library of its graph."""
    graph = function.get_concrete_function(tf.constant(SOURCE)).graph
    return graph.as_graph_def().library.function


def _variable_casts_in_loops(function):
    """Cast nodes fed by a variable read, inside the loops (and their conds) of
    ``function``'s graph: the nested functions of its library."""
    count = 0
    for nested in _loop_functions(function):
        nodes = {node.name: node for node in nested.node_def}
        for node in nested.node_def:
            source = nodes.get(node.input[0].split(":")[0]) if node.input else None
            if node.op == "Cast" and source is not None:
                count += source.op == "ReadVariableOp"
    return count


@pytest.mark.slow
def test_mixed_precision_weights_are_cast_once_before_the_loop(monkeypatch):
    """Under mixed_bfloat16 a layer reads its float32 weights cast to bfloat16 at
    every call; the searches cast each one once, before the loop
    (`once.weights_cast_once`): no cast of a variable is left inside the loops,
    and the results are those of casting at every step bit for bit, greedy and
    beam, with the tied output layer, the deep output, two decoder layers and the
    kept attention context."""
    import contextlib

    import keras

    from keras_selfattn.models import build_seq2seq

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(3)
        model = build_seq2seq(
            12, 11, num_hiddens=16, num_heads=2, num_layers=1, ffn_hiddens=32,
            decoder_units=16, embedding_dim=16, dropout=0.0, tie_embeddings=True,
            deep_output_hiddens=24, decoder_layers=2,
        )  # fmt: skip
    finally:
        keras.config.set_dtype_policy("float32")
    assert model.decoder.cell.compute_dtype == "bfloat16"
    source = tf.constant(SOURCE)

    def searches():
        greedy = tf.function(lambda s: greedy_decode(model, s, 6))
        beam = tf.function(lambda s: beam_search_decode(model, s, 3, 6))
        return greedy, beam, [f(source) for f in (greedy, beam)]

    greedy, beam, once = searches()
    assert _variable_casts_in_loops(greedy) == _variable_casts_in_loops(beam) == 0
    monkeypatch.setattr(
        "keras_selfattn.decoding.once.weights_cast_once",
        lambda model: contextlib.nullcontext(),
    )
    greedy, beam, every_step = searches()
    assert _variable_casts_in_loops(greedy) > 0 and _variable_casts_in_loops(beam) > 0
    for ours, reference in zip(once, every_step, strict=True):
        for key in ("ids", "scores", "lengths"):
            np.testing.assert_array_equal(ours[key].numpy(), reference[key].numpy())


def _ops_in_loops(function, op):
    """How many ``op`` nodes the loops (and their conds) of ``function`` hold."""
    return sum(node.op == op for f in _loop_functions(function) for node in f.node_def)


def test_the_dropping_loop_steps_in_an_inner_loop_without_a_cond_a_step():
    """TensorFlow's loop that drops ended sentences runs its steps in an inner
    loop, left when it is time to drop (`tensorflow_loops.loop_dropping_finished`):
    the loops hold a nested loop and no ``tf.cond`` (a cond a step costs a
    switch and a merge for every loop variable), greedy and beam."""
    model = tiny_model()
    searches = (
        tf.function(lambda s: greedy_decode(model, s, 6)),
        tf.function(lambda s: beam_search_decode(model, s, 3, 6)),
    )
    for function in searches:
        conds = _ops_in_loops(function, "If") + _ops_in_loops(function, "StatelessIf")
        nested = _ops_in_loops(function, "While") + _ops_in_loops(
            function, "StatelessWhile"
        )
        assert (conds, nested) == (0, 1)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_tied_output_kernel_is_transposed_once_before_the_loop(monkeypatch, policy):
    """With tied embeddings a step multiplies by ``E^T``; the searches transpose
    ``E`` once, before the loop (`Seq2Seq.decoding_invariants`), where without
    it every step transposed it (which Grappler folds into a slower product).
    Greedy's tokens and scores are those of the search that transposes every step
    (one search traced again, not both: the fast tier's budget)."""
    import contextlib

    import keras

    from keras_selfattn.models import Seq2Seq, build_seq2seq

    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(5)
        model = build_seq2seq(
            12, 11, num_hiddens=16, num_heads=2, num_layers=1, ffn_hiddens=32,
            decoder_units=16, embedding_dim=16, dropout=0.0, tie_embeddings=True,
            deep_output_hiddens=24,
        )  # fmt: skip
    finally:
        keras.config.set_dtype_policy("float32")

    def greedy():
        return tf.function(lambda s: greedy_decode(model, s, 6))

    held = greedy()
    beam = tf.function(lambda s: beam_search_decode(model, s, 3, 6))
    assert [_ops_in_loops(f, "Transpose") for f in (held, beam)] == [0, 0]
    monkeypatch.setattr(
        Seq2Seq, "decoding_invariants", lambda self: contextlib.nullcontext()
    )
    every_step = greedy()
    assert _ops_in_loops(every_step, "Transpose") > 0
    ours, reference = (f(tf.constant(SOURCE)) for f in (held, every_step))
    for key in ("ids", "lengths"):
        np.testing.assert_array_equal(ours[key].numpy(), reference[key].numpy())
    np.testing.assert_allclose(
        ours["scores"].numpy(), reference["scores"].numpy(), rtol=1e-5
    )
    # Outside a search (training, a plain call) the layer transposes as before.
    assert model.target_embedding.output_kernel().shape == (16, 11)


# Slow: XLA compiles or traces several searches (over 4 CPU-s).
@pytest.mark.slow
@pytest.mark.parametrize("min_rows", [0, tensorflow_loops.XLA_STAGE_MIN_ROWS])
@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_xla_stages_without_the_ended_sentences_give_the_static_loops_results(
    search, min_rows, monkeypatch
):
    """``jit_compile=True`` with a search that drops its ended sentences runs in
    XLA stages (`tensorflow_loops.loop_in_xla_stages`): a stage steps until the
    sentences still searching fit in fewer rows, then those are gathered into the
    next row count, filled up with ended copies; a stage of at most
    ``XLA_STAGE_MIN_ROWS`` decoder rows runs to the end (0: every stage may
    shrink). For sentences that end at different steps (some never), in
    batches of 24, 5 and 1 (with the floor, 24 and 5: 5 sentences already fit
    in one stage), eager (and traced on the 5, without the floor: a user's
    `tf.function` around the stages' loop, whose stage row counts are XLA
    programs of their own, fewer than the 24's): the static loop's tokens,
    lengths and scores, and the stages' sentence counts as described."""
    from tests.test_decoding import (
        _sentences_ending_at_different_steps,
        _strategy_and_search,
    )

    model, source = _sentences_ending_at_different_steps()
    max_len = 9
    strategy, searched = _strategy_and_search(model, search, max_len, jit_compile=True)

    monkeypatch.setattr(tensorflow_loops, "XLA_STAGE_MIN_ROWS", min_rows)
    per_sentence = 3 if search == "beam" else 1  # decoder rows a sentence
    stages = _recording_stage_rows(monkeypatch)
    static_loop = tf.function(  # the reference, traced once for every batch
        lambda s: strategy.finish(*loop.run_loop(model, s, strategy, max_len)),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    # With the floor, one sentence is what 5 already show: a single stage.
    batches = [source, source[:5]] + ([source[7:8]] if min_rows == 0 else [])
    for rows in batches:
        static = static_loop(tf.constant(rows))
        ended_at = np.asarray(static["lengths"]).reshape(len(rows), -1).max(axis=1)
        if len(rows) > 1:
            assert len(set(ended_at.tolist())) > 1 and ended_at.min() < max_len
        # Traced once, on the 5: several stages, fewer XLA programs than 24.
        traced = [tf.function(searched)] if min_rows == 0 and len(rows) == 5 else []
        for call in (searched, *traced):
            stages.clear()
            result = call(tf.constant(rows))
            assert sorted(result) == sorted(static)
            for key in ("ids", "lengths"):
                np.testing.assert_array_equal(
                    np.asarray(result[key]), np.asarray(static[key])
                )
            for key in {"scores", "log_probs"} & set(result):
                np.testing.assert_allclose(
                    np.asarray(result[key]), np.asarray(static[key]), atol=1e-5
                )
            # The stages' sentences: the batch's, then the row count of those
            # left, while a stage has more than min_rows decoder rows.
            shrinks = len(rows) > 1 and len(rows) * per_sentence > min_rows
            assert stages[0] == len(rows) and (len(stages) > 1) == shrinks
            assert all(a > b for a, b in itertools.pairwise(stages))
            assert set(stages[1:]) <= {1, 2, 3, 4, 6, 8, 12, 16}
            assert all(s * per_sentence > min_rows for s in stages[:-1])


# Slow: XLA compiles or traces several searches (over 4 CPU-s).
@pytest.mark.slow
@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_xla_stages_end_each_sentence_at_its_length_cap(search, monkeypatch):
    """``jit_compile=True`` with ``max_length_ratio``: the caps follow their
    sentences through the gathers and writes between XLA stages (every stage
    may shrink here), so each sentence is what searching it alone, without
    XLA, with ``max_len`` set to its cap gives."""
    from tests.test_decoding import (
        RATIO,
        assert_as_alone,
        capped_batch,
        length_caps,
        search_by_name,
    )

    monkeypatch.setattr(tensorflow_loops, "XLA_STAGE_MIN_ROWS", 0)
    stages = _recording_stage_rows(monkeypatch)
    model, source, max_len = capped_batch()
    capped = search_by_name(
        model, search, source, max_len, max_length_ratio=RATIO, jit_compile=True
    )
    assert len(stages) > 2, stages
    for row, cap in enumerate(length_caps(source, max_len)):
        alone = search_by_name(model, search, source[row : row + 1], cap)
        assert_as_alone(capped, alone, row)


@pytest.mark.slow
def test_a_length_ratio_keys_a_graph_of_its_own():
    """Each ratio has its cached graph (eager and XLA); None keeps today's keys."""
    model = tiny_model()
    greedy_decode(model, SOURCE, 6)
    greedy_decode(model, SOURCE, 6, max_length_ratio=None)
    greedy_decode(model, SOURCE, 6, max_length_ratio=1.5)
    greedy_decode(model, SOURCE, 6, max_length_ratio=2)
    beam_search_decode(model, SOURCE, 3, 6, max_length_ratio=1.5, jit_compile=True)
    assert sorted(search._GRAPHS[model], key=repr) == sorted(
        [
            ("greedy", 6, False),
            (("greedy", 6, False), "max_length_ratio", 1.5),
            (("greedy", 6, False), "max_length_ratio", 2.0),
            ("xla", (("beam", 3, 6, 0.6), "max_length_ratio", 1.5)),
        ],
        key=repr,
    )


def _recording_stage_rows(monkeypatch):
    """A list that receives the sentence count of every XLA stage run."""
    stages = []
    original = tensorflow_loops._xla_stage

    def recording(model, strategy, max_len, output):
        stage = original(model, strategy, max_len, output)

        def run(t, tokens, states, finished, memory):
            seen = tf.numpy_function(
                lambda rows: stages.append(int(rows)) or rows,
                [tf.shape(finished)[0]],
                tf.int32,
            )
            with tf.control_dependencies([seen]):
                return stage(tf.identity(t), tokens, states, finished, memory)

        return run

    monkeypatch.setattr(tensorflow_loops, "_xla_stage", recording)
    return stages


@pytest.mark.parametrize(
    "searching, rows",
    [
        (0, 0),
        (1, 1),
        (2, 2),
        (3, 3),
        (4, 4),
        (5, 6),
        (7, 8),
        (9, 12),
        (13, 16),
        (97, 128),
    ],
)
def test_the_next_xla_stage_has_a_power_of_two_of_rows(searching, rows):
    assert (
        int(tensorflow_loops._next_stage_rows(tf.constant(searching, tf.int32))) == rows
    )


@pytest.mark.parametrize("beam", [1, 2])
def test_between_xla_stages_the_ended_are_written_and_the_rest_gathered(beam):
    """`_between_stages`: 7 sentences, 2 ended -> the 2 written into the
    results at their batch positions, the 5 others gathered (their decoder rows
    too, ``beam`` a sentence) into 6 rows, the sixth a filler: marked as ended,
    its sentence -1, so that it is never written. At ``max_len`` all are
    written and none is left."""
    ended = np.array([False, True, False, False, True, False, False])
    sentences = tf.constant([6, 5, 4, 3, 2, 1, 0], tf.int32)  # batch positions
    finished = ended if beam == 1 else np.repeat(ended[:, None], beam, axis=1)
    rows = np.arange(7 * beam, dtype="int32")  # row r's token and state: r
    state = tf.constant(np.stack([rows, -rows], axis=1).astype("float32"))
    memory = {"lengths": tf.constant(np.arange(7) + 10, tf.int32)}
    results = {"lengths": tf.zeros([7], tf.int32)}

    def between(at_max_len):
        return tensorflow_loops._between_stages(
            tf.constant(at_max_len),
            tf.constant(rows),
            [state],
            tf.constant(finished),
            memory,
            sentences,
            results,
        )

    tokens, states, flags, kept_memory, left, written = between(False)
    kept = np.array([0, 2, 3, 5, 6, 0])  # row 0 fills
    kept_rows = (kept[:, None] * beam + np.arange(beam)).reshape(-1)
    np.testing.assert_array_equal(tokens.numpy(), kept_rows)
    np.testing.assert_array_equal(states[0].numpy()[:, 1], -kept_rows)
    flags = np.asarray(flags).reshape(6, -1)
    assert not flags[:5].any() and flags[5].all()
    np.testing.assert_array_equal(left.numpy(), [6, 4, 3, 1, 0, -1])
    np.testing.assert_array_equal(kept_memory["lengths"].numpy(), kept + 10)
    np.testing.assert_array_equal(written["lengths"].numpy(), [0, 0, 14, 0, 0, 11, 0])
    *_, left, written = between(True)
    assert left.shape == (0,)
    np.testing.assert_array_equal(written["lengths"].numpy(), np.arange(7)[::-1] + 10)
