"""Greedy and beam search against brute-force references on a tiny random model.

Backend-free: tests/test_jax_backend.py runs this file again under
KERAS_BACKEND=jax (the searches jitted there); the tests of TensorFlow graphs
skip themselves on other backends.
"""

import itertools
import math
import re

import keras
import numpy as np
import pytest
from keras import ops

from keras_selfattn.decoding import (
    END_ID,
    LENGTH_CAP_MARGIN,
    PAD_ID,
    START_ID,
    beam_search_decode,
    greedy_decode,
)
from keras_selfattn.models import build_seq2seq

on_tensorflow = pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="a TensorFlow graph test"
)

TARGET_VOCAB = 7  # ids 0..6; 3 is the end id
SOURCE = np.array([[5, 6, 7, 8, 0], [9, 4, 0, 0, 0], [4, 5, 6, 7, 8]], "int32")


def tiny_model(target_vocab=TARGET_VOCAB, seed=7):
    keras.utils.set_random_seed(seed)
    return build_seq2seq(
        12,
        target_vocab,
        num_hiddens=16,
        num_heads=2,
        num_layers=1,
        ffn_hiddens=32,
        decoder_units=16,
        embedding_dim=8,
        dropout=0.0,
    )


def sharpened_model():
    model = tiny_model()
    # Sharpen the output layer so that sequences differ clearly in probability.
    kernel, bias = model.logits_dense.get_weights()
    model.logits_dense.set_weights([kernel * 6.0, bias])
    return model


@pytest.fixture(scope="module")
def model():
    return sharpened_model()


def sequence_log_probs(model, source, sequences):
    """Teacher-forced log-probability of each token sequence (padding excluded, as
    searched), all in one padded batch: the decoder is causal, so the padding after
    a sequence changes none of its positions."""
    width = max(len(tokens) for tokens in sequences)
    target_in = np.full((len(sequences), width), PAD_ID, "int32")
    target_in[:, 0] = START_ID
    for row, tokens in enumerate(sequences):
        target_in[row, 1 : len(tokens)] = tokens[:-1]
    logits = model.predict_on_batch(
        {"source": np.repeat(source[None], len(sequences), 0), "target_in": target_in}
    ).astype(np.float64)
    logits[..., PAD_ID] = -np.inf
    top = logits.max(-1, keepdims=True)
    log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    return [
        float(sum(log_probs[row, t, token] for t, token in enumerate(tokens)))
        for row, tokens in enumerate(sequences)
    ]


def sequence_log_prob(model, source, tokens):
    """Teacher-forced log-probability of `tokens` (padding excluded, as searched)."""
    return sequence_log_probs(model, source, [tokens])[0]


def test_greedy_equals_a_python_loop_over_full_passes(model):
    max_len = 6
    result = greedy_decode(model, SOURCE, max_len, return_attention=True)
    ids = np.asarray(result["ids"])
    for row, source in enumerate(SOURCE):
        tokens = []
        for _ in range(max_len):
            target_in = np.array([[START_ID] + tokens], "int32")
            logits = model.predict_on_batch(
                {"source": source[None], "target_in": target_in}
            )[0, -1]
            logits[PAD_ID] = -np.inf
            tokens.append(int(np.argmax(logits)))
            if tokens[-1] == END_ID:
                break
        assert ids[row, : len(tokens)].tolist() == tokens
        assert np.all(ids[row, len(tokens) :] == PAD_ID)
        assert np.asarray(result["lengths"])[row] == len(tokens)
        np.testing.assert_allclose(
            np.asarray(result["scores"])[row],
            sequence_log_prob(model, source, tokens),
            atol=1e-4,
        )
    attention = np.asarray(result["attention"])
    assert attention.shape == (3, ids.shape[1], 5)
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    assert np.all(attention[1, :, 2:] == 0)  # padding of sentence 1 never attended


def test_beam_search_finds_the_exhaustive_optimum(model):
    """Beam wide enough to hold every hypothesis == scoring every sequence by hand."""
    max_len, alpha = 3, 0.6
    choices = [t for t in range(1, TARGET_VOCAB)]  # every id but padding
    candidates = []
    for length in range(1, max_len + 1):
        for tokens in itertools.product(choices, repeat=length):
            if END_ID in tokens[:-1]:
                continue
            if length < max_len and tokens[-1] != END_ID:
                continue
            candidates.append(tokens)
    beam = beam_search_decode(
        model, SOURCE[:1], beam_size=len(candidates), max_len=max_len, alpha=alpha
    )
    scored = [
        (log_prob / ((5.0 + len(tokens)) / 6.0) ** alpha, tokens)
        for tokens, log_prob in zip(
            candidates, sequence_log_probs(model, SOURCE[0], candidates)
        )
    ]
    scored.sort(reverse=True)
    best_ids = np.asarray(beam["ids"])[0, 0]
    length = np.asarray(beam["lengths"])[0, 0]
    assert tuple(best_ids[:length]) == scored[0][1]
    np.testing.assert_allclose(
        np.asarray(beam["scores"])[0, :10], [s for s, _ in scored[:10]], atol=1e-4
    )


def test_beam_of_one_is_greedy_and_beams_are_sorted(model):
    greedy = greedy_decode(model, SOURCE, 8)
    beam = beam_search_decode(model, SOURCE, beam_size=1, max_len=8, alpha=0.0)
    width = greedy["ids"].shape[1]
    np.testing.assert_array_equal(
        np.asarray(beam["ids"])[:, 0, :width], np.asarray(greedy["ids"])
    )
    np.testing.assert_allclose(
        np.asarray(beam["log_probs"])[:, 0], np.asarray(greedy["scores"]), atol=1e-5
    )
    wide = beam_search_decode(model, SOURCE, beam_size=4, max_len=8)
    scores = np.asarray(wide["scores"])
    assert np.all(np.diff(scores, axis=1) <= 1e-6)
    assert np.all(
        scores[:, 0]
        >= np.asarray(beam["log_probs"])[:, 0]
        / ((5 + np.asarray(beam["lengths"])[:, 0]) / 6) ** 0.6
        - 1e-5
    )


def test_batching_and_extra_padding_do_not_change_results(model):
    batched = greedy_decode(model, SOURCE, 6)
    padded = greedy_decode(model, np.pad(SOURCE, ((0, 0), (0, 3))), 6)
    np.testing.assert_array_equal(np.asarray(batched["ids"]), np.asarray(padded["ids"]))
    for row in range(len(SOURCE)):
        alone = greedy_decode(model, SOURCE[row : row + 1], 6)
        width = alone["ids"].shape[1]
        np.testing.assert_array_equal(
            np.asarray(alone["ids"])[0], np.asarray(batched["ids"])[row, :width]
        )
        np.testing.assert_allclose(
            np.asarray(alone["scores"])[0],
            np.asarray(batched["scores"])[row],
            atol=1e-5,
        )


# Slow: XLA compiles or traces several searches (over 4 CPU-s).
@pytest.mark.slow
@on_tensorflow
def test_searches_run_as_one_graph_with_dynamic_shapes(model):
    import tensorflow as tf

    signature = [tf.TensorSpec([None, None], tf.int32)]
    greedy = tf.function(
        lambda s: greedy_decode(model, s, 6)["ids"], input_signature=signature
    )
    beam = tf.function(
        lambda s: beam_search_decode(model, s, 3, 6)["ids"], input_signature=signature
    )
    np.testing.assert_array_equal(
        greedy(SOURCE).numpy(), greedy_decode(model, SOURCE, 6)["ids"].numpy()
    )
    assert beam(SOURCE).shape[:2] == (3, 3)
    graph = greedy.get_concrete_function().graph.as_graph_def()
    ops = {node.op for node in graph.node} | {
        n.op for f in graph.library.function for n in f.node_def
    }
    assert "While" in ops or "StatelessWhile" in ops
    assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}


def test_bad_beam_size(model):
    with pytest.raises(ValueError, match="beam_size=0"):
        beam_search_decode(model, SOURCE, beam_size=0, max_len=4)


def reference_beam(
    model, source, beam_size, max_len, alpha, penalize_each_step, vocab=TARGET_VOCAB
):
    """Beam search in Python over teacher-forced full passes (no decoding API).

    With ``penalize_each_step`` the candidates of a step are ranked by
    log_prob / ((5 + length) / 6) ** alpha, else by log_prob (then reranked).
    """

    def normalized(tokens, log_prob):
        return log_prob / ((5.0 + len(tokens)) / 6.0) ** alpha

    beams = [((), 0.0)]
    for _ in range(max_len):
        open_beams = [b for b in beams if not b[0] or b[0][-1] != END_ID]
        if not open_beams:
            break
        # One input shape for every step (beam_size rows, max_len + 1 positions,
        # padded): the decoder is causal, so the padding after a position does not
        # change its logits, and a backend that compiles per shape (JAX) compiles
        # this call once rather than once per (rows, length); predict_on_batch
        # runs the model compiled (tf.function, jax.jit), not op by op.
        position = len(open_beams[0][0])  # every open beam has as many tokens
        target_in = np.full((beam_size, max_len + 1), PAD_ID, "int32")
        target_in[:, 0] = START_ID
        for row, (tokens, _) in enumerate(open_beams):
            target_in[row, 1 : position + 1] = tokens
        logits = model.predict_on_batch(
            {"source": np.repeat(source[None], beam_size, 0), "target_in": target_in}
        )[: len(open_beams), position].astype(np.float64)
        logits[:, PAD_ID] = -np.inf
        log_probs = (
            logits
            - np.log(
                np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)
            )
            - logits.max(-1, keepdims=True)
        )
        candidates = [b for b in beams if b not in open_beams]  # finished: carried on
        for (tokens, log_prob), row in zip(open_beams, log_probs):
            for token in range(1, vocab):
                candidates.append(((*tokens, token), log_prob + row[token]))
        rank = (lambda c: normalized(*c)) if penalize_each_step else (lambda c: c[1])
        beams = sorted(candidates, key=rank, reverse=True)[:beam_size]
    return sorted(((normalized(*b), b[0]) for b in beams), reverse=True)


def test_beam_search_applies_the_length_penalty_at_every_step(model):
    """Equal to a Python beam search that ranks each step's candidates by the
    normalized score; for this model and alpha, normalizing only after the search
    keeps other hypotheses (so the test fails on the old search)."""
    beam_size, max_len, alpha = 2, 6, 2.0
    out = beam_search_decode(model, SOURCE, beam_size, max_len, alpha=alpha)
    differs = False
    for row, source in enumerate(SOURCE):
        expected = reference_beam(model, source, beam_size, max_len, alpha, True)
        old = reference_beam(model, source, beam_size, max_len, alpha, False)
        differs |= [t for _, t in old] != [t for _, t in expected]
        for rank, (score, tokens) in enumerate(expected):
            length = np.asarray(out["lengths"])[row, rank]
            assert tuple(np.asarray(out["ids"])[row, rank, :length]) == tokens
            np.testing.assert_allclose(
                np.asarray(out["scores"])[row, rank], score, atol=1e-4
            )
    assert differs, "choose a case where the two rankings keep different hypotheses"


def test_decoding_inference_and_serving_ask_the_model_not_its_layer_names():
    """Code that runs a model uses Seq2Seq's decoding API, not its layer names."""
    import pathlib

    package = pathlib.Path(__file__).resolve().parents[1] / "keras_selfattn"
    files = [*sorted((package / "decoding").rglob("*.py")), package / "translation.py"]
    files += sorted((package / "serving").rglob("*.py"))
    offenders = [str(f) for f in files if "get_layer(" in f.read_text()]
    assert not offenders, offenders


def sample(logits, t):
    """(B,) int32 tokens drawn from ``logits``, the seed (11, t): a stateless draw
    of the backend (keras.random takes no tensor seed)."""
    if keras.config.backend() == "jax":
        import jax

        key = jax.random.fold_in(jax.random.key(11), t)
        return jax.random.categorical(key, logits, axis=-1).astype("int32")
    import tensorflow as tf

    seed = tf.stack([tf.constant(11), t])
    return tf.random.stateless_categorical(logits, 1, seed, dtype=tf.int32)[:, 0]


def test_sampling_is_one_more_strategy_of_the_same_loop(model):
    """A strategy that samples overrides `choose` alone; the loop does the rest."""
    import dataclasses

    from keras_selfattn.decoding import GreedySearch, decode

    @dataclasses.dataclass(frozen=True)
    class Sampling(GreedySearch):
        temperature: float = 1.0

        def choose(self, log_probs, t):
            return sample(log_probs / self.temperature, t)

    greedy = greedy_decode(model, SOURCE, 8)
    cold = decode(model, SOURCE, Sampling(temperature=1e-4), 8)
    for key in ("ids", "lengths"):
        np.testing.assert_array_equal(np.asarray(cold[key]), np.asarray(greedy[key]))
    sampled = decode(model, SOURCE, Sampling(), 8)
    assert not np.array_equal(np.asarray(sampled["ids"]), np.asarray(greedy["ids"]))
    for row, source in enumerate(SOURCE):
        length = int(sampled["lengths"][row])
        tokens = np.asarray(sampled["ids"])[row, :length].tolist()
        assert (
            PAD_ID not in tokens and not np.asarray(sampled["ids"])[row, length:].any()
        )
        assert END_ID not in tokens[:-1]
        # The score is the sampled tokens' log-probability, as greedy's is.
        np.testing.assert_allclose(
            float(sampled["scores"][row]),
            sequence_log_prob(model, source, tokens),
            atol=1e-4,
        )
    # Each subclass gets its own cached graph, never greedy's.
    from keras_selfattn import decoding

    assert ("greedy", 8, False) in decoding.search._GRAPHS[model]
    assert (Sampling(), ("greedy", 8, False)) in decoding.search._GRAPHS[model]


def test_a_beam_strategy_can_rank_candidates_its_own_way(model):
    """Ranking each step by raw log-probability (the benchmark's "after" search)
    is `BeamSearch` with `candidate_scores` overridden: it gives the Python
    reference that normalizes only after the search."""
    from keras_selfattn.decoding import BeamSearch, decode

    class RankByLogProb(BeamSearch):
        def candidate_scores(self, total, lengths, finished):
            return total

    beam_size, max_len, alpha = 2, 6, 2.0
    out = decode(model, SOURCE, RankByLogProb(beam_size, alpha), max_len)
    for row, source in enumerate(SOURCE):
        expected = reference_beam(model, source, beam_size, max_len, alpha, False)
        for rank, (score, tokens) in enumerate(expected):
            length = np.asarray(out["lengths"])[row, rank]
            assert tuple(np.asarray(out["ids"])[row, rank, :length]) == tokens
            np.testing.assert_allclose(
                np.asarray(out["scores"])[row, rank], score, atol=1e-4
            )


def numpy_top_k(values, k):
    """Top k of each row, ties to the lower index (a stable sort of -values)."""
    order = np.argsort(-values, axis=-1, kind="stable")[:, :k]
    return np.take_along_axis(values, order, -1), order


@pytest.mark.parametrize("size", [600, 4096, 7919, 8000])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_two_level_top_k_equals_a_sort_ties_included(size, k):
    """The beam's top-k of long rows (blocks, then the best blocks) against a
    stable NumPy sort: values drawn from few integers so that ties are many,
    and normal values; sizes that fill the blocks and ones that need padding."""
    from keras_selfattn.decoding.tensors import top_k_of_rows

    rng = np.random.default_rng(size + k)
    for values in (
        rng.integers(0, 5, [6, size]).astype("float32"),
        rng.normal(size=[6, size]).astype("float32"),
        np.full([2, size], -1e9, "float32"),
    ):
        best, indices = top_k_of_rows(ops.convert_to_tensor(values), k, size)
        expected_best, expected_indices = numpy_top_k(values, k)
        np.testing.assert_array_equal(ops.convert_to_numpy(indices), expected_indices)
        np.testing.assert_array_equal(ops.convert_to_numpy(best), expected_best)
        assert ops.convert_to_numpy(indices).dtype == np.int32


def test_beam_search_over_a_large_vocabulary_equals_the_python_reference():
    """A vocabulary long enough for the two-level top-k (and each hypothesis'
    best tokens only): the same hypotheses and scores as the Python search
    that scores every token of every hypothesis."""
    vocab = 700
    model = tiny_model(vocab, seed=3)
    kernel, bias = model.logits_dense.get_weights()
    bias[END_ID] += 2.0  # so that some hypotheses end within max_len
    model.logits_dense.set_weights([kernel * 8.0, bias])
    beam_size, max_len, alpha = 3, 4, 0.6
    out = beam_search_decode(model, SOURCE, beam_size, max_len, alpha=alpha)
    ended = 0
    for row, source in enumerate(SOURCE):
        expected = reference_beam(
            model, source, beam_size, max_len, alpha, True, vocab=vocab
        )
        for rank, (score, tokens) in enumerate(expected):
            length = np.asarray(out["lengths"])[row, rank]
            assert tuple(np.asarray(out["ids"])[row, rank, :length]) == tokens
            np.testing.assert_allclose(
                np.asarray(out["scores"])[row, rank], score, atol=1e-4
            )
            ended += tokens[-1] == END_ID
    if keras.config.backend() == "tensorflow":  # JAX draws other initial weights
        assert ended, "choose weights with which some hypotheses end"


def _sentences_ending_at_different_steps():
    """A model whose sentences end at once, later or never, and 24 sources."""
    model = sharpened_model()
    kernel, bias = model.logits_dense.get_weights()
    bias[END_ID] += 2.0  # some sentences end at once, some later, some never
    model.logits_dense.set_weights([kernel, bias])
    rng = np.random.default_rng(3)
    source = rng.integers(4, 12, size=(24, 7)).astype("int32")
    source[np.arange(7)[None, :] >= rng.integers(1, 8, size=(24, 1))] = PAD_ID
    return model, source


def _strategy_and_search(model, search, max_len, jit_compile=False):
    """``(strategy, searched)`` for "greedy", "greedy with attention" or "beam"
    (3 hypotheses, alpha 0.6): the strategy object, and its search by name."""
    from keras_selfattn import decoding

    if search == "beam":

        def searched(s):
            return beam_search_decode(
                model, s, 3, max_len, alpha=0.6, jit_compile=jit_compile
            )

        return decoding.BeamSearch(3, 0.6), searched
    strategy = decoding.GreedySearch(search == "greedy with attention")

    def searched(s):
        return greedy_decode(
            model,
            s,
            max_len,
            return_attention=strategy.return_attention,
            jit_compile=jit_compile,
        )

    return strategy, searched


@pytest.mark.slow
@on_tensorflow
@pytest.mark.parametrize(
    "search, drop_when_ended",
    [
        ("greedy", 0.25),
        ("greedy with attention", 0.25),
        ("greedy", 0.0),
        ("beam", 0.25),
        ("beam", 0.0),
        ("beam", 1.0),
    ],
)
def test_searches_without_the_ended_sentences_give_the_static_loops_results(
    search, drop_when_ended, monkeypatch
):
    """On TensorFlow a search stops computing the rows of sentences whose search
    has ended (`tensorflow_loops.loop_dropping_finished`: greedy without
    attention weights, and beam search once all K hypotheses of a sentence have
    ended), dropping them once they are ``DROP_WHEN_ENDED`` of the sentences
    left (0: at every end; 1: when all have); its results are the static loop's
    (what JAX runs), for sentences that end at different steps, in eager calls
    and in a traced function."""
    import tensorflow as tf

    from keras_selfattn import decoding

    monkeypatch.setattr(decoding.tensorflow_loops, "DROP_WHEN_ENDED", drop_when_ended)
    model, source = _sentences_ending_at_different_steps()
    max_len = 9
    strategy, searched = _strategy_and_search(model, search, max_len)

    static = tf.function(
        lambda s: strategy.finish(*decoding.loop.run_loop(model, s, strategy, max_len))
    )(source)
    # The searches end at several steps, some before max_len.
    ended_at = np.asarray(static["lengths"]).reshape(len(source), -1).max(axis=1)
    assert len(set(ended_at.tolist())) > 1 and ended_at.min() < max_len
    for result in (searched(source), tf.function(searched)(source)):
        assert sorted(result) == sorted(static)
        for key in ("ids", "lengths"):
            np.testing.assert_array_equal(
                np.asarray(result[key]), np.asarray(static[key])
            )
        for key in {"scores", "log_probs", "attention"} & set(result):
            np.testing.assert_allclose(
                np.asarray(result[key]), np.asarray(static[key]), atol=1e-6
            )
    empty = searched(np.zeros([0, 5], "int32"))
    assert np.asarray(empty["ids"]).shape[0] == 0


# A length ratio whose products with token counts are exact in float32, so that
# the caps below are the test's own arithmetic.
RATIO = 0.5


def length_caps(source, max_len, ratio=RATIO):
    """Each sentence's cap of steps, by hand: min(max_len, ceil(R * n) + 10)."""
    tokens = (np.asarray(source) != PAD_ID).sum(axis=1)
    return [min(max_len, math.ceil(ratio * int(n)) + 10) for n in tokens]


def search_by_name(model, search, source, max_len, **options):
    """ "greedy", "greedy with attention" (the static loop) or "beam" (4)."""
    if search == "beam":
        return beam_search_decode(model, source, 4, max_len, **options)
    attention = search == "greedy with attention"
    return greedy_decode(model, source, max_len, return_attention=attention, **options)


def capped_batch():
    """A model, 12 sources of 1 to 7 tokens and max_len 14: at `RATIO` the caps
    are 11 to 14; some sentences end before theirs, others would run past it."""
    model, source = _sentences_ending_at_different_steps()
    return model, source[:12], 14


def assert_as_alone(batched, alone, row):
    """Sentence ``row`` of the ``batched`` result is the search ``alone`` of it:
    the same ids (zeros after its steps), lengths, scores (and attention)."""
    assert sorted(batched) == sorted(alone)
    steps = np.asarray(alone["ids"]).shape[-1]
    ids = np.asarray(batched["ids"])[row]
    np.testing.assert_array_equal(ids[..., :steps], np.asarray(alone["ids"])[0])
    assert not ids[..., steps:].any()
    np.testing.assert_array_equal(
        np.asarray(batched["lengths"])[row], np.asarray(alone["lengths"])[0]
    )
    for key in {"scores", "log_probs"} & set(alone):
        np.testing.assert_allclose(
            np.asarray(batched[key])[row], np.asarray(alone[key])[0], atol=1e-5
        )
    if "attention" in alone:
        np.testing.assert_allclose(
            np.asarray(batched["attention"])[row, :steps],
            np.asarray(alone["attention"])[0],
            atol=1e-5,
        )


@pytest.mark.slow
@pytest.mark.parametrize("search", ["greedy", "greedy with attention", "beam"])
def test_a_length_ratio_ends_each_sentence_as_max_len_at_its_cap_would(search):
    """``max_length_ratio``: each sentence of a batch, where the cap binds for
    some and not for others, is what searching it alone with ``max_len`` set
    to its cap gives (ids, lengths, scores; beam: all 4 hypotheses). On
    TensorFlow greedy and beam run the loop that drops ended sentences, greedy
    with attention the static loop; on JAX the jitted loop."""
    assert LENGTH_CAP_MARGIN == 10
    model, source, max_len = capped_batch()
    caps = length_caps(source, max_len)
    free = search_by_name(model, search, source, max_len)
    capped = search_by_name(model, search, source, max_len, max_length_ratio=RATIO)
    longest = np.asarray(free["lengths"]).reshape(len(source), -1).max(axis=1)
    binds = longest > np.array(caps)
    assert binds.any() and not binds.all(), (longest, caps)
    for row, cap in enumerate(caps):
        alone = search_by_name(model, search, source[row : row + 1], cap)
        assert_as_alone(capped, alone, row)
    empty = search_by_name(model, search, source[:0], max_len, max_length_ratio=RATIO)
    assert np.asarray(empty["ids"]).shape[0] == 0


@pytest.mark.parametrize("search", ["greedy", "greedy with attention", "beam"])
def test_no_length_ratio_or_one_that_never_binds_gives_today_s_results(search):
    """None (the default) is today's search; a ratio whose caps are all at
    ``max_len`` or beyond gives its results too."""
    model, source, max_len = capped_batch()
    today = search_by_name(model, search, source, max_len)
    off = search_by_name(model, search, source, max_len, max_length_ratio=None)
    wide = search_by_name(model, search, source, max_len, max_length_ratio=100.0)
    for result in (off, wide):
        assert sorted(result) == sorted(today)
        for key in ("ids", "lengths"):
            np.testing.assert_array_equal(
                np.asarray(result[key]), np.asarray(today[key])
            )
    for key in today:
        np.testing.assert_array_equal(np.asarray(off[key]), np.asarray(today[key]))
        np.testing.assert_allclose(
            np.asarray(wide[key]), np.asarray(today[key]), atol=1e-6
        )


@pytest.mark.parametrize(
    "bad", [0, -1, 0.0, float("nan"), float("inf"), "2", True, [2.0]]
)
def test_a_bad_length_ratio_is_refused_naming_it(model, bad):
    message = re.escape(f"max_length_ratio={bad!r}")
    with pytest.raises((ValueError, TypeError), match=message):
        greedy_decode(model, SOURCE, 6, max_length_ratio=bad)
    with pytest.raises((ValueError, TypeError), match=message):
        beam_search_decode(model, SOURCE, 3, 6, max_length_ratio=bad)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_an_empty_batch_gives_empty_results_of_every_shape(model, jit_compile):
    """A batch of no sentences gives no sentences: greedy and beam, on every
    backend (keras' JAX ``take`` from an empty batch dropped the beam's axis,
    and the jitted loop refused the shapes it came back with), compiled with
    XLA or not. Served batches can be empty (an empty request)."""
    source = np.zeros([0, 5], "int32")
    greedy = greedy_decode(model, source, 6, jit_compile=jit_compile)
    assert {k: tuple(np.asarray(v).shape) for k, v in greedy.items()} == {
        "ids": (0, 0),
        "lengths": (0,),
        "scores": (0,),
    }
    beam = beam_search_decode(model, source, 3, 6, jit_compile=jit_compile)
    assert {k: tuple(np.asarray(v).shape) for k, v in beam.items()} == {
        "ids": (0, 3, 0),
        "lengths": (0, 3),
        "scores": (0, 3),
        "log_probs": (0, 3),
    }


def test_the_keras_internals_the_searches_read_exist_in_the_installed_keras():
    """`keras_internals.variable_reads` (the one place the decoding package reads
    Keras' private attributes) against the installed Keras: every variable of a
    model and its layers, its own dtype, and the compute dtype an autocast float
    variable is read in under a mixed policy (float32 under float32)."""
    from keras_selfattn.decoding.keras_internals import variable_reads

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        inner = keras.layers.Dense(3, name="inner")
        outer = keras.Sequential([keras.Input((2,)), inner])
    finally:
        keras.config.set_dtype_policy("float32")
    reads = {id(v): (own, read) for v, own, read in variable_reads(outer)}
    assert reads[id(inner.kernel)] == ("float32", "bfloat16")
    assert reads[id(inner.bias)] == ("float32", "bfloat16")
    assert {id(v) for v in outer.variables} <= set(reads)
    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)])
    assert {r for _, _, r in variable_reads(plain)} == {"float32"}
