"""The searches over a shortlist's width: exact on what the shortlist keeps.

The reference is a full-width search whose logits are the model's own with
every piece the shortlist leaves out at -1e9 (its softmax weight 0): the same
tokens, the same scores. The greedy search is also checked against a NumPy
loop over the model's full-width logits; bad options are refused in one line.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn.decoding import beam_search_decode, greedy_decode
from keras_selfattn.decoding.output import SearchLogits
from keras_selfattn.decoding.tensorflow_ops import size_bucket
from keras_selfattn.models import build_seq2seq, shortlist_ops
from keras_selfattn.models.output_layer import (
    OutputLayer,
    search_output,
)
from keras_selfattn.reserved_ids import END_ID, PAD_ID, START_ID
from keras_selfattn.search_settings import SearchSettings

SOURCE_VOCAB, TARGET_VOCAB, MAX_LEN = 30, 700, 9


@pytest.fixture(scope="module", params=["plain", "tied_deep_output"])
def model(request):
    options = {}
    if request.param == "tied_deep_output":
        options = {"tie_embeddings": True, "deep_output_hiddens": 24}
    model = build_seq2seq(
        SOURCE_VOCAB,
        TARGET_VOCAB,
        num_hiddens=16,
        num_heads=2,
        num_layers=1,
        ffn_hiddens=32,
        decoder_units=16,
        embedding_dim=16,
        seed=3,
        **options,
    )
    # A sharper output layer and a likelier end id: sentences end at
    # different steps (the tied model's, for the searches that drop them).
    layer = model.target_embedding if model.logits_dense is None else model.logits_dense
    kernel, bias = layer.get_weights()
    bias[END_ID] += 2.0
    layer.set_weights([kernel * 12.0, bias])
    return model


def _shortlist(seed=0, width=40):
    rng = np.random.default_rng(seed)
    candidates = rng.integers(4, TARGET_VOCAB, (SOURCE_VOCAB, width)).astype(np.int32)
    candidates[PAD_ID] = END_ID
    always = np.arange(0, 12, dtype=np.int32)  # reserved + frequent
    return candidates, always


def _sources(seed=1):
    rng = np.random.default_rng(seed)
    source = rng.integers(1, SOURCE_VOCAB, (6, 5)).astype(np.int32)
    source[2, 3:] = 0
    source[4, 1:] = 0
    return source


class MaskedFullWidth:
    """The reference output spec: the model's full-width logits, the pieces
    the shortlist leaves out at -1e9."""

    def __init__(self, shortlist):
        self.shortlist = shortlist

    def graph_key(self):
        return None

    def bind(self, model, source_ids):
        candidates, always = self.shortlist
        ids = shortlist_ops.shortlist_ids(
            source_ids, candidates, always, model.target_vocab_size
        )
        kept = tf.scatter_nd(
            ids[:, None], tf.ones_like(ids, tf.bool), [model.target_vocab_size]
        )

        def logits_of(hidden):
            logits = model._logits(hidden, training=False)
            return tf.where(kept[None, :], logits, -1e9)

        size = model.target_vocab_size
        return SearchLogits(size, size, logits_of)


def _searched(model, source, output, beam_size, jit_compile):
    def search(ids):
        if beam_size == 1:
            return greedy_decode(
                model, ids, MAX_LEN, jit_compile=jit_compile, output=output
            )
        return beam_search_decode(
            model, ids, beam_size, MAX_LEN, jit_compile=jit_compile, output=output
        )

    traced = tf.function(
        search,
        input_signature=[tf.TensorSpec([None, None], "int32")],
        autograph=False,
    )
    return {k: np.asarray(v) for k, v in traced(tf.constant(source)).items()}


@pytest.fixture(scope="module")
def masked_full_width(model):
    """``reference(beam_size)``: the masked full-width search of `_sources` over
    `_shortlist` (no XLA), searched once per model and beam size for the four
    ways of searching the shortlist's width that are checked against it."""
    searched = {}

    def reference(beam_size):
        if beam_size not in searched:
            output = MaskedFullWidth(_shortlist())
            searched[beam_size] = _searched(model, _sources(), output, beam_size, False)
        return searched[beam_size]

    return reference


SEARCH_MODES = {  # name: (jit_compile, bucketed)
    "rows_dropped": (False, False),
    "rows_dropped_bucketed": (False, True),
    "xla": (True, False),
    "xla_bucketed": (True, True),
}
# Every search mode and beam over the plain model; over the tied model with a deep
# output (its output kernel the transposed embedding), the two modes that differ
# in both (the loop dropping rows, exact width; XLA, width padded to a bucket).
WIDTH_SEARCH_CASES = [
    pytest.param(model, beam, *SEARCH_MODES[mode], id=f"{model}-{beam}-{mode}")
    for model, modes in (
        ("plain", list(SEARCH_MODES)),
        ("tied_deep_output", ["rows_dropped", "xla_bucketed"]),
    )
    for beam in (1, 4)
    for mode in modes
]


@pytest.mark.parametrize(
    "model, beam_size, jit_compile, bucketed", WIDTH_SEARCH_CASES, indirect=["model"]
)
def test_shortlist_width_search_is_the_masked_full_width_search(
    model, masked_full_width, beam_size, jit_compile, bucketed
):
    """Exact on what it keeps, also with the width padded to a bucket (what an
    XLA export searches: the padding's logits are masked, never chosen)."""
    shortlist = _shortlist()
    source = _sources()
    output = OutputLayer(shortlist, bucketed=bucketed)
    got = _searched(model, source, output, beam_size, jit_compile)
    want = masked_full_width(beam_size)
    for key in ("ids", "lengths"):
        np.testing.assert_array_equal(got[key], want[key])
    for key in {"scores", "log_probs"} & set(want):
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-4)
    kept = shortlist_ops.shortlist_ids(source, *shortlist, TARGET_VOCAB).numpy()
    assert np.isin(got["ids"], np.append(kept, PAD_ID)).all()


def _bucket_reference(count):
    """The smallest of 1, 2, 3, 4, 6, 8, 12, ... (powers of two and three
    quarters of them) at least ``count``, by enumeration."""
    sizes = sorted({2**e for e in range(32)} | {3 * 2**e for e in range(31)})
    return 0 if count == 0 else next(s for s in sizes if s >= count)


def test_size_buckets_against_an_enumeration():
    counts = [0, 1, 2, 3, 4, 5, 6, 7, 9, 13, 100, 767, 768, 769, 1247, 4097, 70000]
    got = [int(size_bucket(tf.constant(c, tf.int32))) for c in counts]
    assert got == [_bucket_reference(c) for c in counts]
    assert all(c <= g < 1.5 * c + 1 for c, g in zip(counts, got))


@pytest.mark.parametrize("width, upper", [(1, 700), (5, 700), (41, 700), (600, 700)])
def test_padded_ids_keep_the_ids_and_fill_to_a_bucket(width, upper):
    ids = tf.range(4, 4 + width, dtype=tf.int32)
    padded = shortlist_ops.padded_ids(ids, upper, PAD_ID).numpy()
    assert padded.size == min(_bucket_reference(width), upper)
    np.testing.assert_array_equal(padded[:width], ids.numpy())
    assert (padded[width:] == PAD_ID).all()
    # The padding's logits are masked: a search never chooses it.
    bound = SearchLogits(upper, 1, ids=tf.constant(padded))
    no_padding = bound.no_padding.numpy()
    assert (no_padding[width:] < -1e8).all() and (no_padding[:width] == 0).all()


def test_greedy_over_the_shortlist_against_numpy(model):
    """A NumPy greedy loop over the model's full-width logits, the left-out
    pieces masked: the argmax is the full argmax whenever that one is kept."""
    candidates, always = _shortlist(seed=4, width=25)
    source = _sources(seed=5)
    # The first step's full argmax of half the rows kept, of the others not.
    first, _ = model.decode_step(
        np.full([len(source)], START_ID, np.int32), model.initial_decoder_state(source)
    )
    best = np.asarray(first)[:, 1:].argmax(1) + 1
    always = np.union1d(always, best[:3]).astype(np.int32)
    candidates = np.where(np.isin(candidates, best[3:]), END_ID, candidates)
    shortlist = (candidates.astype(np.int32), always)
    got = _searched(model, source, OutputLayer(shortlist), 1, False)
    kept = np.union1d(shortlist[0][source.ravel()].ravel(), shortlist[1])
    kept = kept[kept != PAD_ID]
    state = model.initial_decoder_state(source)
    tokens = np.full([len(source)], START_ID, np.int32)
    done = np.zeros(len(source), bool)
    ids, scores, agreed = [], np.zeros(len(source)), 0
    for _ in range(got["ids"].shape[1]):
        logits, state = model.decode_step(tokens, state)
        logits = np.asarray(logits, np.float64)
        within = logits[:, kept]
        log_probs = within - within.max(1, keepdims=True)
        log_probs -= np.log(np.exp(log_probs).sum(1, keepdims=True))
        chosen = kept[within.argmax(1)]
        full = logits.copy()
        full[:, PAD_ID] = -np.inf
        full_best = full.argmax(1)
        in_list = np.isin(full_best, kept)
        np.testing.assert_array_equal(chosen[in_list], full_best[in_list])
        agreed += int(in_list.sum())
        scores += np.where(done, 0.0, log_probs.max(1))
        tokens = np.where(done, 0, chosen).astype(np.int32)
        ids.append(tokens)
        done |= tokens == END_ID
    assert agreed > 0
    np.testing.assert_array_equal(got["ids"], np.stack(ids, 1))
    np.testing.assert_allclose(got["scores"], scores, rtol=1e-4, atol=1e-4)


def test_a_shortlist_of_every_piece_is_the_plain_search(model):
    """Whole-vocabulary shortlist: the plain searches' tokens, positions = ids."""
    everything = (
        np.tile(np.arange(TARGET_VOCAB, dtype=np.int32), [SOURCE_VOCAB, 1]),
        np.arange(4, dtype=np.int32),
    )
    source = _sources(seed=6)
    for beam_size in (1, 4):
        got = _searched(model, source, OutputLayer(everything), beam_size, False)
        want = _searched(model, source, None, beam_size, False)
        np.testing.assert_array_equal(got["ids"], want["ids"])
        np.testing.assert_allclose(got["scores"], want["scores"], atol=1e-4)


def test_search_output_is_none_without_options():
    assert search_output() is None
    assert isinstance(search_output(precision="bfloat16"), OutputLayer)


@pytest.mark.parametrize(
    "options, named",
    [
        ({"precision": "float16"}, "precision='float16'"),
        ({"precision": None}, "precision=None"),
        ({"quantize": "int4"}, "quantize='int4'"),
        ({"quantize": ""}, "quantize=''"),
        ({"quantize": ["int8"]}, "quantize=['int8']"),
    ],
)
def test_bad_options_are_refused_in_one_line(options, named):
    with pytest.raises(ValueError, match=named.replace("[", r"\[")) as caught:
        SearchSettings(**options)
    assert "\n" not in str(caught.value)
    if "precision" in options:
        with pytest.raises(ValueError, match="precision="):
            OutputLayer(None, options["precision"])
    settings = SearchSettings(precision="bfloat16", quantize="int8")
    assert (settings.precision, settings.quantize) == ("bfloat16", "int8")
