"""The data side of a run, without a model: FILE sharding, the fingerprint, the plan."""

import pytest

from keras_selfattn import text
from keras_selfattn.training import TrainConfig
from keras_selfattn.training.data import run_batches, run_data
from keras_selfattn.training.fit.step_plan import plan_steps
from keras_selfattn.training.resume.data_fingerprint import (
    describe_data_change,
    file_fingerprint,
)


def test_with_a_file_per_worker_each_worker_reads_only_its_own(tmp_path):
    first = text.write_pairs(tmp_path / "a.tsv", [(f"a{i}", "x") for i in range(20)])
    second = text.write_pairs(
        tmp_path / "b.tsv.gz", [(f"b{i}", "y") for i in range(20)]
    )
    files = [str(first), str(second)]
    config = TrainConfig(seed=1)
    assert run_batches.files_of_worker(files, 1, 0, config) is None  # one worker
    assert run_batches.files_of_worker(files[:1], 2, 0, config) is None  # DATA
    capped = TrainConfig(seed=1, max_pairs=10)  # the first pairs of the whole stream
    assert run_batches.files_of_worker(files, 2, 0, capped) is None
    for worker, letter in enumerate("ab"):
        own = run_batches.files_of_worker(files, 2, worker, config)
        data = run_data.RunData(own, None, [], [], None, {})
        pairs = run_data.training_pairs(data, config, repeat=True)
        sources = [s.decode() for s, _ in pairs.take(50).as_numpy_iterator()]
        assert {s[0] for s in sources} == {letter}
        # Whole passes over the worker's files, one after another.
        assert sources[:20] == [f"{letter}{i}" for i in range(20)]
    # (tests/training/test_multi_worker.py runs two real workers on two files.)


def test_a_changed_file_is_named(tmp_path):
    path = text.write_pairs(tmp_path / "a.tsv", [("a", "b")] * 3)
    before = {"data": [file_fingerprint(str(path))], "settings": {"seed": 0}}
    assert describe_data_change(before, before) is None
    text.write_pairs(path, [("a", "b")] * 4)
    after = {"data": [file_fingerprint(str(path))], "settings": {"seed": 0}}
    assert f"{path} changed since the run started (12 -> 16 bytes)" in (
        describe_data_change(before, after)
    )
    other = {**before, "settings": {"seed": 1}}
    assert "data settings changed" in describe_data_change(before, other)


def test_the_step_plan():
    plan = plan_steps(TrainConfig(train_steps=10, eval_every=4, save_every=6), None)
    assert (plan.period, plan.periods) == (2, 5)
    assert [plan.evaluates(p) for p in range(1, 6)] == [False, True, False, True, True]
    assert [plan.backs_up(p) for p in range(1, 6)] == [False, False, True, False, True]
    epochs = plan_steps(TrainConfig(epochs=3, batch_size=10), 105)
    assert (epochs.total_steps, epochs.eval_every, epochs.steps_per_epoch) == (
        30,
        10,
        10,
    )
    assert plan_steps(TrainConfig(train_steps=5), None).eval_every == 5
    with pytest.raises(ValueError, match="number of training pairs"):
        plan_steps(TrainConfig(), None)


def test_held_out_window_is_recorded_and_restored(tmp_path):
    pairs = [(f"s{i % 150}", f"t{i}") for i in range(600)]
    path = text.write_pairs(tmp_path / "corpus.tsv", pairs)
    config = TrainConfig(train_steps=4, max_validation_pairs=5, max_test_pairs=3)
    first = run_data.prepare_run_data(str(path), tmp_path / "run", config)
    assert first.split.window == 50 and first.train_pairs is None  # 5 / 0.1
    assert (len(first.validation), len(first.test)) == (5, 3)
    assert all(pair in pairs[:50] for pair in first.validation + first.test)
    held_out = {s for s, _ in first.validation + first.test}
    train = [
        (s.decode(), t.decode())
        for s, t in run_data.training_pairs(first, config).as_numpy_iterator()
    ]
    # Every other pair trains, the repeats of a held-out source past the window too.
    assert train == [p for p in pairs if p[0] not in held_out]
    resumed = run_data.prepare_run_data(str(path), tmp_path / "run", config)
    assert resumed.split == first.split
    assert (resumed.validation, resumed.test) == (first.validation, first.test)
    # Epochs need a count: one pass over the training pairs.
    epochs = TrainConfig(epochs=1, max_validation_pairs=5, max_test_pairs=3)
    counted = run_data.prepare_run_data(str(path), tmp_path / "epochs", epochs)
    assert counted.train_pairs == len(train)


def test_the_log_line_says_where_the_held_out_pairs_come_from(tmp_path):
    pairs = [(f"s{i}", f"t{i}") for i in range(200)]
    path = text.write_pairs(tmp_path / "corpus.tsv", pairs)
    valid = text.write_pairs(tmp_path / "valid.tsv", pairs[:3])
    config = TrainConfig(train_steps=2, max_validation_pairs=5, max_test_pairs=5)
    windowed = run_data.prepare_run_data(str(path), tmp_path / "a", config)
    assert windowed.describe() == (
        "data: 1 file(s); 5 valid pairs held out by source fingerprint from the "
        "first 50 pairs; 5 test pairs held out by source fingerprint from the "
        "first 50 pairs"
    )
    given = run_data.prepare_run_data(
        str(path), tmp_path / "b", TrainConfig(epochs=1), valid_data=str(valid)
    )
    assert given.describe().startswith(
        "data: 1 file(s); 3 valid pairs from --valid-data;"
    )
    assert given.describe().endswith(f"; {given.train_pairs} to train on")


@pytest.mark.parametrize("max_pairs", [None, 30])
def test_the_length_counters_count_distinct_pairs_over_many_passes(tmp_path, max_pairs):
    """The pairs read are counted once, however many passes the stream makes
    over a small file (not once per pass)."""
    from keras_selfattn.models import ModelConfig

    short = [(f"a{i} b", "x y") for i in range(30)]
    long = [(" ".join(["w"] * 9), "x") for _ in range(10)]  # 9 > max_source_len
    pairs = short + long
    path = text.write_pairs(tmp_path / "pairs.tsv", pairs)
    config = TrainConfig(
        seed=2,
        batch_size=4,
        shuffle_buffer=8,
        source_tokenizer="word",
        target_tokenizer="word",
        max_pairs=max_pairs,
    )
    tokenizer = text.PairTokenizer.build(
        pairs,
        text.TokenizerConfig(kind="word"),
        text.TokenizerConfig.for_target(kind="word"),
    )
    model = ModelConfig(max_source_len=5, max_target_len=5)
    data = run_data.RunData([str(path)], None, [], [], None, {})
    counters = text.stream.StreamCounters.create()
    batches = run_batches.training_stream(
        data, tokenizer, model, config, counters=counters, num_buckets=1
    )
    read = sum(1 for _ in batches.take(60))  # 240 pairs: 10 passes or more
    assert read == 60
    counts = counters.values()
    distinct = pairs[: max_pairs or len(pairs)]
    too_long = sum(1 for source, _ in distinct if len(source.split()) > 5)
    assert (counts["pairs"], counts["too_long"]) == (len(distinct), too_long)
    report = run_batches.length_report(counts, model)
    assert report.startswith(f"{too_long} of {len(distinct)} pairs read")
    # The stream is still every pass whole, one after another (one file: in
    # file order), the first pass and the next ones alike.
    fresh = text.stream.StreamCounters.create()
    stream = run_data.training_pairs(data, config, repeat=True, counters=fresh)
    got = [s.decode() for s, _ in stream.take(3 * len(distinct)).as_numpy_iterator()]
    assert got == [source for source, _ in distinct] * 3
