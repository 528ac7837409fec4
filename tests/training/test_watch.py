"""The validation watch: scores of translations, and the health check catching a
collapsed encoder provoked on purpose."""

import numpy as np
import pytest
from keras import ops

from keras_selfattn import text
from keras_selfattn.models import InverseSquareRootSchedule, build_seq2seq
from keras_selfattn.training.callbacks.best_model import BestModel
from keras_selfattn.training.callbacks.early_stopping import EarlyStopping
from keras_selfattn.training.callbacks.health import (
    DISTINCT_FLOOR,
    SOURCE_DEPENDENCE_FLOOR,
    TOP_SHARE_CEILING,
    TOP_SHARE_MARGIN,
    Health,
    source_dependence,
    top_share,
)
from keras_selfattn.training.callbacks.validation import Validation, ValidationWatch
from keras_selfattn.training.fit.step_plan import StepPlan

TINY = {
    "num_hiddens": 16,
    "num_heads": 2,
    "num_layers": 1,
    "ffn_hiddens": 32,
    "decoder_units": 16,
    "embedding_dim": 8,
    "max_target_len": 12,
    "dropout": 0.0,
}
PAIRS = text.load_bundled_dates()[:40]


@pytest.fixture(scope="module")
def tokenizer():
    return text.PairTokenizer.build(
        PAIRS,
        text.TokenizerConfig(kind="word", split_digits=True),
        text.TokenizerConfig.for_target(kind="char"),
    )


def tiny_model(tokenizer, seed=0):
    return build_seq2seq(
        tokenizer.source_vocab_size, tokenizer.target_vocab_size, seed=seed, **TINY
    )


def collapse_encoder(model):
    """What the collapsed Multi30k run looked like: the encoder's last layer norm
    emits its beta whatever the source (gamma 0), so the memory is the same
    vector at every position of every source."""
    norm = model.encoder_final_norm
    gamma, beta = norm.get_weights()
    norm.set_weights(
        [np.zeros_like(gamma), np.random.default_rng(0).normal(size=beta.shape)]
    )


def numpy_source_dependence(model, source_ids, target_in):
    """The documented definition, written out in NumPy from the model's logits."""
    other = np.roll(source_ids, 1, axis=0)

    def probabilities(source):
        logits = ops.convert_to_numpy(
            model({"source": source, "target_in": target_in})
        ).astype(np.float64)
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    tvd = 0.5 * np.abs(probabilities(source_ids) - probabilities(other)).sum(-1)
    keep = (target_in != 0) & np.any(source_ids != other, axis=1)[:, None]
    return tvd[keep].mean()


def test_source_dependence_matches_numpy(tokenizer):
    model = tiny_model(tokenizer)
    watch = ValidationWatch(PAIRS, tokenizer, model.model_config, sample_size=20)
    source_ids, target_in = watch._batch(watch.translator(model))
    assert target_in[:, 0].tolist() == [2] * len(target_in)  # START first
    got = source_dependence(model, source_ids, target_in)
    np.testing.assert_allclose(
        got, numpy_source_dependence(model, source_ids, target_in), rtol=1e-4
    )
    assert got > 0


def test_identical_sources_have_no_dependence_to_measure(tokenizer):
    model = tiny_model(tokenizer)
    ids = np.array([[5, 6, 0], [5, 6, 0]], "int32")
    assert source_dependence(model, ids, np.array([[2, 4], [2, 5]], "int32")) is None


def test_health_check_catches_a_collapsed_encoder(tokenizer):
    model = tiny_model(tokenizer)
    watch = ValidationWatch(PAIRS, tokenizer, model.model_config, sample_size=30)
    healthy_dependence = source_dependence(
        model, *watch._batch(watch.translator(model))
    )
    collapse_encoder(model)
    scores, examples, health = watch(model)
    assert health.source_dependence < 1e-6 < healthy_dependence
    assert not health.ok
    assert any("no longer depend on the source" in p for p in health.problems)
    # One sentence for every input: a collapsed model writes the same output.
    assert scores["val_distinct"] == health.distinct < DISTINCT_FLOOR
    assert any("same sentence for every input" in p for p in health.problems)
    assert scores["val_top_share"] == health.top_share == 1.0
    assert any("one of a few sentences" in p for p in health.problems)
    assert set(scores) == set(watch.log_keys())
    assert (
        list(examples)
        == watch.example_keys()
        == [f"val_example_{i}" for i in (1, 2, 3)]
    )
    source, reference = PAIRS[0]
    assert examples["val_example_1"].startswith(source + " => ")
    assert examples["val_example_1"].endswith(f"(reference: {reference})")
    assert 0 <= scores["val_chrf"] <= 100 and 0 <= scores["val_bleu"] <= 100


def test_health_thresholds():
    assert Health(source_dependence=0.3, distinct=0.9).ok
    assert Health(source_dependence=None, distinct=0.9).ok
    low = Health(source_dependence=SOURCE_DEPENDENCE_FLOOR / 2, distinct=0.9)
    assert not low.ok and len(low.problems) == 1
    assert Health(0.3, DISTINCT_FLOOR / 2).to_dict()["ok"] is False
    # a few strings: at the ceiling and over the margin times the references' share
    assert not Health(0.3, 0.9, TOP_SHARE_CEILING, 0.2).ok
    assert Health(0.3, 0.9, TOP_SHARE_CEILING - 0.01, 0.0).ok
    assert Health(0.3, 0.9, 0.9, 0.9 / TOP_SHARE_MARGIN).ok  # not over the margin
    assert Health(0.3, 0.9, 0.9, None).to_dict()["ok"] is False


def number_pairs(count=200):
    """A number corpus: digits spelled out -> the number as digits."""
    names = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
    ]
    return [(" ".join(names[int(d)] for d in str(n)), str(n)) for n in range(count)]


def word_pairs(count=200):
    """A word corpus: short sentences -> their words reversed, capitalised."""
    rng = np.random.default_rng(0)
    words = [
        "cat",
        "dog",
        "sun",
        "sea",
        "red",
        "big",
        "old",
        "new",
        "runs",
        "eats",
        "sees",
        "tree",
        "house",
    ]
    pairs = []
    for _ in range(count):
        sentence = list(rng.choice(words, size=rng.integers(2, 6)))
        pairs.append((" ".join(sentence), " ".join(sentence[::-1]).capitalize()))
    return pairs


def _watch(pairs):
    return ValidationWatch(pairs, tokenizer=None, model_config=None, sample_size=500)


@pytest.mark.parametrize("corpus", [number_pairs, word_pairs])
def test_a_two_string_model_fails_whatever_the_corpus(corpus):
    """One of two strings for every input (10% distinct translations,
    source dependence 0.053) passed; it fails, on numbers and on words."""
    pairs = corpus()
    watch = _watch(pairs)
    # Two strings for 180 inputs and 20 other ones: distinct is over its floor.
    two = [("11", "the cat") if i % 2 else ("7", "a dog") for i in range(180)]
    translations = [t[0 if corpus is number_pairs else 1] for t in two]
    translations += [f"other {i}" for i in range(20)]
    references = {reference for _, reference in pairs}
    assert len(set(translations)) / len(references) >= DISTINCT_FLOOR
    health = watch.health(translations, 0.053)
    assert health.source_dependence > SOURCE_DEPENDENCE_FLOOR
    assert health.top_share == pytest.approx(181 / 200)  # two strings and one other
    assert health.reference_top_share < 0.1
    assert not health.ok and len(health.problems) == 1
    (problem,) = health.problems
    assert "one of a few sentences for most inputs" in problem and "90%" in problem


@pytest.mark.parametrize("corpus", [number_pairs, word_pairs])
def test_varied_translations_pass(corpus):
    pairs = corpus()
    watch = _watch(pairs)
    # Close to the references, with mistakes, but one a source.
    translations = [reference[:-1] + "x" for _, reference in pairs]
    health = watch.health(translations, 0.4)
    assert health.ok, health.problems
    assert health.top_share < TOP_SHARE_CEILING


def test_a_corpus_whose_references_repeat_is_not_failed_for_translating_them():
    """Questions answered yes / no / maybe: the references are three strings."""
    rng = np.random.default_rng(1)
    answers = rng.choice(["yes", "no", "maybe"], size=150, p=[0.5, 0.3, 0.2])
    pairs = [(f"question {i} ?", str(answer)) for i, answer in enumerate(answers)]
    watch = _watch(pairs)
    right = watch.health([reference for _, reference in pairs], 0.3)
    assert right.top_share == right.reference_top_share == 1.0
    assert right.ok, right.problems
    # ... also when it gets many wrong, as long as it writes what references say.
    wrong = watch.health(list(rng.choice(["yes", "no", "maybe"], size=150)), 0.3)
    assert wrong.ok, wrong.problems
    # Only "yes": the distinct check (1 of 3 references: 0.33) lets it through,
    # and 100% is not over twice the references' 100%; chrF will say the rest.
    assert watch.health(["yes"] * 150, 0.3).ok


def test_top_share():
    assert top_share([]) == 0.0
    assert top_share(["a"] * 3 + ["b", "c", "d"]) == pytest.approx(5 / 6)
    assert top_share(list("abcdefghij")) == pytest.approx(0.3)


class ScriptedWatch:
    """Stands in for ValidationWatch: returns the chrF values it is given, in order."""

    def __init__(self, chrfs):
        self.pairs = [("a", "b")]
        self.chrfs = list(chrfs)

    def log_keys(self):
        return ["val_chrf", "val_bleu", "val_distinct", "val_source_dependence"]

    def example_keys(self):
        return ["val_example_1"]

    def __call__(self, model):
        chrf = self.chrfs.pop(0)
        scores = {"val_chrf": chrf, "val_bleu": chrf / 2, "val_distinct": 1.0}
        scores["val_source_dependence"] = 0.5
        return scores, {"val_example_1": f"a => b{chrf}"}, Health(0.5, 1.0)


def test_best_by_chrf_keeps_the_highest_score_and_stops_on_patience(
    tokenizer, tmp_path
):
    model = tiny_model(tokenizer)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    source = np.array([[5, 6, 0]], "int32")
    validation = __import__("tensorflow").data.Dataset.from_tensors(
        (
            {"source": source, "target_in": np.array([[2, 4]], "int32")},
            np.array([[4, 3]], "int32"),
        )
    )
    plan = StepPlan(4, 1, 1, 1)
    evaluation = Validation(plan, validation, ScriptedWatch([10.0, 30.0, 20.0, 25.0]))
    best_model = BestModel(plan, tmp_path / "model.keras", best_by="chrf")
    stopping = EarlyStopping(plan, patience=2, best_by="chrf")
    callbacks = [evaluation, best_model, stopping]
    for callback in callbacks:
        callback.set_model(model)
    saved = []
    for epoch in range(4):
        before = (tmp_path / "model.keras").exists() and (
            tmp_path / "model.keras"
        ).stat().st_mtime_ns
        logs = {"loss": 1.0}
        for callback in callbacks:
            callback.on_epoch_end(epoch, logs)
        after = (tmp_path / "model.keras").stat().st_mtime_ns
        saved.append(after != before)
        assert evaluation.examples["val_example_1"].startswith("a => b")
    assert saved == [True, True, False, False]
    assert best_model.best == 30.0 and stopping.wait == 2
    assert model.stop_training  # two validations without a better chrF


def test_best_by_needs_translations():
    with pytest.raises(
        ValueError, match="best_by must be one of 'chrf', 'bleu', 'loss'"
    ):
        BestModel(StepPlan(1, 1, 1, 1), "m.keras", best_by="ter")
    from keras_selfattn.training import TrainConfig

    with pytest.raises(ValueError, match="validation_translations > 0"):
        TrainConfig(best_by="bleu", validation_translations=0)
    assert TrainConfig(best_by="loss", validation_translations=0).best_by == "loss"


def test_inverse_square_root_schedule_follows_its_formula():
    schedule = InverseSquareRootSchedule(1e-3, 100)
    for step in (0, 49, 99, 100, 399, 10_000):
        n = step + 1  # Keras' optimizer counts iterations from 0
        expected = 1e-3 * min(n / 100, np.sqrt(100 / max(n, 100)))
        np.testing.assert_allclose(float(schedule(step)), expected, rtol=1e-6)
    assert float(schedule(99)) == pytest.approx(1e-3)  # the peak ends the warm-up
    assert float(schedule(399)) == pytest.approx(5e-4)  # 4x the warm-up: half
    clone = InverseSquareRootSchedule.from_config(schedule.get_config())
    assert float(clone(1234)) == float(schedule(1234))


# (A compiled model with the schedule, loaded in a fresh process under every
# import order: tests/test_registrations.py.)
