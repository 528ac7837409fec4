"""Greedy and beam search against brute-force references on a tiny random model."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from keras_selfattn.decoding import (
    END_ID,
    PAD_ID,
    START_ID,
    beam_search_decode,
    greedy_decode,
)
from keras_selfattn.models import build_seq2seq

TARGET_VOCAB = 7  # ids 0..6; 3 is the end id
SOURCE = np.array([[5, 6, 7, 8, 0], [9, 4, 0, 0, 0], [4, 5, 6, 7, 8]], "int32")


def tiny_model():
    keras.utils.set_random_seed(7)
    return build_seq2seq(
        12,
        TARGET_VOCAB,
        num_hiddens=16,
        num_heads=2,
        num_layers=1,
        ffn_hiddens=32,
        decoder_units=16,
        embedding_dim=8,
        dropout=0.0,
    )


@pytest.fixture(scope="module")
def model():
    model = tiny_model()
    # Sharpen the output layer so that sequences differ clearly in probability.
    kernel, bias = model.logits_dense.get_weights()
    model.logits_dense.set_weights([kernel * 6.0, bias])
    return model


def sequence_log_prob(model, source, tokens):
    """Teacher-forced log-probability of `tokens` (padding excluded, as searched)."""
    target_in = np.array([[START_ID] + list(tokens[:-1])], "int32")
    logits = model.predict({"source": source[None], "target_in": target_in}, verbose=0)[
        0
    ]
    logits[:, PAD_ID] = -np.inf
    log_probs = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    return float(sum(log_probs[t, token] for t, token in enumerate(tokens)))


def test_greedy_equals_a_python_loop_over_full_passes(model):
    max_len = 6
    result = greedy_decode(model, SOURCE, max_len, return_attention=True)
    ids = result["ids"].numpy()
    for row, source in enumerate(SOURCE):
        tokens = []
        for _ in range(max_len):
            target_in = np.array([[START_ID] + tokens], "int32")
            logits = model.predict(
                {"source": source[None], "target_in": target_in}, verbose=0
            )[0, -1]
            logits[PAD_ID] = -np.inf
            tokens.append(int(np.argmax(logits)))
            if tokens[-1] == END_ID:
                break
        assert ids[row, : len(tokens)].tolist() == tokens
        assert np.all(ids[row, len(tokens) :] == PAD_ID)
        assert result["lengths"].numpy()[row] == len(tokens)
        np.testing.assert_allclose(
            result["scores"].numpy()[row],
            sequence_log_prob(model, source, tokens),
            atol=1e-4,
        )
    attention = result["attention"].numpy()
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
    scored = []
    for tokens in candidates:
        penalty = ((5.0 + len(tokens)) / 6.0) ** alpha
        scored.append((sequence_log_prob(model, SOURCE[0], tokens) / penalty, tokens))
    scored.sort(reverse=True)
    best_ids = beam["ids"].numpy()[0, 0]
    length = beam["lengths"].numpy()[0, 0]
    assert tuple(best_ids[:length]) == scored[0][1]
    np.testing.assert_allclose(
        beam["scores"].numpy()[0, :10], [s for s, _ in scored[:10]], atol=1e-4
    )


def test_beam_of_one_is_greedy_and_beams_are_sorted(model):
    greedy = greedy_decode(model, SOURCE, 8)
    beam = beam_search_decode(model, SOURCE, beam_size=1, max_len=8, alpha=0.0)
    width = greedy["ids"].shape[1]
    np.testing.assert_array_equal(
        beam["ids"].numpy()[:, 0, :width], greedy["ids"].numpy()
    )
    np.testing.assert_allclose(
        beam["log_probs"].numpy()[:, 0], greedy["scores"].numpy(), atol=1e-5
    )
    wide = beam_search_decode(model, SOURCE, beam_size=4, max_len=8)
    scores = wide["scores"].numpy()
    assert np.all(np.diff(scores, axis=1) <= 1e-6)
    assert np.all(
        scores[:, 0]
        >= beam["log_probs"].numpy()[:, 0]
        / ((5 + beam["lengths"].numpy()[:, 0]) / 6) ** 0.6
        - 1e-5
    )


def test_batching_and_extra_padding_do_not_change_results(model):
    batched = greedy_decode(model, SOURCE, 6)
    padded = greedy_decode(model, np.pad(SOURCE, ((0, 0), (0, 3))), 6)
    np.testing.assert_array_equal(batched["ids"].numpy(), padded["ids"].numpy())
    for row in range(len(SOURCE)):
        alone = greedy_decode(model, SOURCE[row : row + 1], 6)
        width = alone["ids"].shape[1]
        np.testing.assert_array_equal(
            alone["ids"].numpy()[0], batched["ids"].numpy()[row, :width]
        )
        np.testing.assert_allclose(
            alone["scores"].numpy()[0], batched["scores"].numpy()[row], atol=1e-5
        )


def test_searches_run_as_one_graph_with_dynamic_shapes(model):
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


def reference_beam(model, source, beam_size, max_len, alpha, penalize_each_step):
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
        target_in = np.array([[START_ID, *tokens] for tokens, _ in open_beams], "int32")
        logits = ops.convert_to_numpy(
            model(
                {
                    "source": np.repeat(source[None], len(open_beams), 0),
                    "target_in": target_in,
                },
                training=False,
            )
        )[:, -1].astype(np.float64)
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
            for token in range(1, TARGET_VOCAB):
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
            length = out["lengths"].numpy()[row, rank]
            assert tuple(out["ids"].numpy()[row, rank, :length]) == tokens
            np.testing.assert_allclose(
                out["scores"].numpy()[row, rank], score, atol=1e-4
            )
    assert differs, "choose a case where the two rankings keep different hypotheses"


def test_decoding_inference_and_serving_ask_the_model_not_its_layer_names():
    """Issue 14 §3: code that runs a model uses Seq2Seq's decoding API."""
    import pathlib

    package = pathlib.Path(__file__).resolve().parents[1] / "keras_selfattn"
    files = [package / "decoding.py", package / "translation.py"]
    files += sorted((package / "serving").rglob("*.py"))
    offenders = [str(f) for f in files if "get_layer(" in f.read_text()]
    assert not offenders, offenders


def test_sampling_is_one_more_strategy_of_the_same_loop(model):
    """A strategy that samples overrides `choose` alone; the loop does the rest."""
    import dataclasses

    from keras_selfattn.decoding import GreedySearch, decode

    @dataclasses.dataclass(frozen=True)
    class Sampling(GreedySearch):
        temperature: float = 1.0

        def choose(self, log_probs, t):
            seed = tf.stack([tf.constant(11), t])
            drawn = tf.random.stateless_categorical(
                log_probs / self.temperature, 1, seed, dtype=tf.int32
            )
            return drawn[:, 0]

    greedy = greedy_decode(model, SOURCE, 8)
    cold = decode(model, SOURCE, Sampling(temperature=1e-4), 8)
    for key in ("ids", "lengths"):
        np.testing.assert_array_equal(cold[key].numpy(), greedy[key].numpy())
    sampled = decode(model, SOURCE, Sampling(), 8)
    assert not np.array_equal(sampled["ids"].numpy(), greedy["ids"].numpy())
    for row, source in enumerate(SOURCE):
        length = int(sampled["lengths"][row])
        tokens = sampled["ids"].numpy()[row, :length].tolist()
        assert PAD_ID not in tokens and not sampled["ids"].numpy()[row, length:].any()
        assert END_ID not in tokens[:-1]
        # The score is the sampled tokens' log-probability, as greedy's is.
        np.testing.assert_allclose(
            float(sampled["scores"][row]),
            sequence_log_prob(model, source, tokens),
            atol=1e-4,
        )
    # Each subclass gets its own cached graph, never greedy's.
    from keras_selfattn import decoding

    assert ("greedy", 8, False) in decoding._GRAPHS[model]
    assert (Sampling(), ("greedy", 8, False)) in decoding._GRAPHS[model]


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
            length = out["lengths"].numpy()[row, rank]
            assert tuple(out["ids"].numpy()[row, rank, :length]) == tokens
            np.testing.assert_allclose(
                out["scores"].numpy()[row, rank], score, atol=1e-4
            )
