"""Streamed pair files: the same pairs and splits as the in-memory path, bad input,
batches by length."""

import gzip

import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.text import fingerprint_split, learn_vocab, stream
from keras_selfattn.text.buckets import bucket_shapes
from keras_selfattn.text.dataset import batch_by_length
from keras_selfattn.text.vocab import END_ID, PAD_ID, START_ID


def _pairs(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def _corpus(count=300):
    # Repeated sources (a third of them), so groups of equal sources exist.
    return [(f"source {i % 200} x{i % 7}", f"target {i}") for i in range(count)]


def test_stream_gives_what_read_pairs_gives(tmp_path):
    content = (
        "\ufeffGo.\tVa !\tCC-BY 2.0\r\n\n  Hi. \t Salut ! \n\t\nRun!\tCours !\n"
        "\u00a0Oui\u00a0\tYes\u3000\n"  # Unicode spaces are text, on both paths
    )
    plain = tmp_path / "a.tsv"
    plain.write_text(content.replace("\t\n", "\n"), encoding="utf-8")
    compressed = tmp_path / "b.tsv.gz"
    compressed.write_bytes(gzip.compress("Wow!\tÇa alors !\n".encode()))
    expected = text.read_pairs(plain)
    assert _pairs(stream.pair_stream([str(plain)])) == expected
    assert expected == [
        ("Go.", "Va !"),
        ("Hi.", "Salut !"),
        ("Run!", "Cours !"),
        ("\u00a0Oui\u00a0", "Yes\u3000"),
    ]
    files = stream.resolve_data_files(str(tmp_path / "*.tsv*"))
    assert files == [str(plain), str(compressed)]
    # Interleaved one line from each file in turn.
    assert _pairs(stream.pair_stream(files)) == [
        ("Go.", "Va !"),
        ("Wow!", "Ça alors !"),
        ("Hi.", "Salut !"),
        ("Run!", "Cours !"),
        ("\u00a0Oui\u00a0", "Yes\u3000"),
    ]
    # Repeated patterns and lists resolve to each file once.
    assert stream.resolve_data_files([str(plain), str(tmp_path / "*.tsv")]) == [
        str(plain)
    ]


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        ("a\tb\nno tab here\n", 2, "no tab character"),
        ("a\tb\n\tb\n", 2, "empty source"),
        ("a\tb\nc\td\ne\t \n", 3, "empty target"),
    ],
)
def test_a_malformed_line_fails_with_file_and_line(tmp_path, content, line, problem):
    path = tmp_path / "bad.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        _pairs(stream.pair_stream([str(path)]))
    error = stream.malformed_line_error(caught.value)
    assert error is not None and str(error).startswith(f"{path}:{line}: {problem}")
    with pytest.raises(ValueError, match=f"{path}:{line}: {problem}"):
        text.read_pairs(path)  # the in-memory reader says the same


def test_skip_malformed_counts_what_it_skips(tmp_path):
    path = tmp_path / "mixed.tsv"
    path.write_bytes(b"a\tb\nbad\n\xff\xfe\tx\nc\td\n\t\n")
    counters = stream.StreamCounters.create()
    pairs = _pairs(
        stream.pair_stream([str(path)], skip_malformed=True, counters=counters)
    )
    assert pairs == [("a", "b"), ("c", "d")]
    assert counters.values()["malformed"] == 2  # "bad" and the non-UTF-8 line
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        _pairs(stream.pair_stream([str(path)]))
    assert "mixed.tsv:2: no tab character" in str(
        stream.malformed_line_error(caught.value)
    )
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        _pairs(stream.pair_stream([str(tmp_path / "mixed.tsv")], cycle_length=1))
    assert stream.malformed_line_error(RuntimeError("other")) is None


def test_bad_file_arguments(tmp_path):
    (tmp_path / "empty.tsv").write_text("")
    with pytest.raises(ValueError, match=r"empty\.tsv: the file is empty"):
        stream.resolve_data_files(str(tmp_path / "empty.tsv"))
    with pytest.raises(FileNotFoundError, match=r"missing\.tsv.*file not found"):
        stream.resolve_data_files(str(tmp_path / "missing.tsv"))
    with pytest.raises(FileNotFoundError, match=r"matches '.*\*\.nothing'"):
        stream.resolve_data_files(str(tmp_path / "*.nothing"))
    with pytest.raises(ValueError, match="got a directory"):
        stream.resolve_data_files(str(tmp_path))
    with pytest.raises(ValueError, match="No data files given"):
        stream.resolve_data_files([])


@pytest.mark.parametrize("caps", [(None, None), (7, 5)])
def test_streamed_split_equals_the_in_memory_split(tmp_path, caps):
    pairs = _corpus()
    path = text.write_pairs(tmp_path / "pairs.tsv", pairs)
    max_validation, max_test = caps
    in_memory = text.split_pairs(
        text.read_pairs(path),
        (0.8, 0.1, 0.1),
        seed=5,
        max_validation_pairs=max_validation,
        max_test_pairs=max_test,
    )
    scan = fingerprint_split.scan_held_out(
        stream.pair_stream([str(path)]),
        (0.8, 0.1, 0.1),
        seed=5,
        max_validation_pairs=max_validation,
        max_test_pairs=max_test,
    )
    assert scan.validation == in_memory.validation
    assert scan.test == in_memory.test
    train = _pairs(scan.split.train_filter(stream.pair_stream([str(path)])))
    assert train == in_memory.train
    # Uncapped, the whole stream is read and counted; capped, only its window.
    assert scan.train_pairs == (len(train) if max_validation is None else None)
    sizes = [len(in_memory.validation), len(in_memory.test)]
    if max_validation is None:
        assert abs(sizes[0] - 30) <= 2 and abs(sizes[1] - 30) <= 2  # 10 % each
    else:  # a cap, plus at most the rest of one group of equal sources
        assert 7 <= sizes[0] <= 7 + 1 and 5 <= sizes[1] <= 5 + 1
    groups = [{s for s, _ in part} for part in in_memory]
    assert not (groups[0] & groups[1] or groups[0] & groups[2] or groups[1] & groups[2])
    other_seed = text.split_pairs(pairs, (0.8, 0.1, 0.1), seed=6)
    assert other_seed.validation != in_memory.validation or max_validation


def test_held_out_pairs_come_from_a_window_and_nothing_else_is_lost(tmp_path):
    # 2000 pairs, sources repeated (groups of equal sources cross the window).
    pairs = [(f"src {i % 700}", f"tgt {i}") for i in range(2000)]
    paths = [
        text.write_pairs(tmp_path / "a.tsv", pairs[:1000]),
        text.write_pairs(tmp_path / "b.tsv", pairs[1000:]),
    ]
    fractions, caps = (0.8, 0.1, 0.1), (20, 10)
    window = fingerprint_split.held_out_window(fractions, *caps)
    assert window == 200  # 20 / 0.1: the cap decides on any longer corpus
    streamed = stream.pair_stream([str(p) for p in paths])
    scan = fingerprint_split.scan_held_out(
        streamed, fractions, seed=3, max_validation_pairs=20, max_test_pairs=10
    )
    # The rule, computed here from the fingerprints of the first `window` pairs
    # of the stream (files interleaved line by line).
    order = _pairs(streamed)
    head = order[:window]
    fp = fingerprint_split.source_fingerprints([s for s, _ in head], 3).numpy()
    ranked = np.sort(fp)
    validation_max, test_max = ranked[20 - 1], ranked[30 - 1]
    expected_validation = [p for p, f in zip(head, fp) if f <= validation_max]
    expected_test = [p for p, f in zip(head, fp) if validation_max < f <= test_max]
    assert scan.validation == expected_validation
    assert scan.test == expected_test
    assert scan.pairs == window and scan.train_pairs is None
    held_out = {s for s, _ in expected_validation + expected_test}
    train = _pairs(scan.split.train_filter(streamed))
    assert train == [p for p in order if p[0] not in held_out]
    # Nothing wasted: pairs past the window with small fingerprints still train.
    tail = order[window:]
    tail_fp = fingerprint_split.source_fingerprints([s for s, _ in tail], 3).numpy()
    small = [p for p, f in zip(tail, tail_fp) if f <= test_max and p[0] not in held_out]
    assert small and set(small) <= set(train)
    # The list path applies the same rule.
    in_memory = text.split_pairs(
        order, fractions, seed=3, max_validation_pairs=20, max_test_pairs=10
    )
    assert in_memory == (train, expected_validation, expected_test)
    # A corpus no longer than the window is split exactly as if read whole.
    exact = fingerprint_split.scan_held_out(
        stream.pair_stream([str(paths[0])]).take(window),
        fractions,
        seed=3,
        max_validation_pairs=20,
        max_test_pairs=10,
    )
    assert exact.split.window is None and exact.train_pairs == window - 30
    # What a run directory records rebuilds the same split.
    restored = fingerprint_split.HeldOutSplit.from_record(
        scan.split.record(), [s for s, _ in scan.validation + scan.test]
    )
    assert restored == scan.split


@pytest.mark.parametrize(
    ("caps", "message"),
    [((-1, 5), "max_validation_pairs=-1"), ((5, 2.5), "max_test_pairs=2.5")],
)
def test_bad_held_out_caps(caps, message):
    with pytest.raises(ValueError, match=message):
        fingerprint_split.held_out_window((0.8, 0.1, 0.1), *caps)
    with pytest.raises(ValueError, match="fractions"):
        fingerprint_split.held_out_window((0.8, 0.1, 0.2), 5, 5)


def test_vocabularies_from_a_stream_equal_the_in_memory_ones(tmp_path):
    pairs = [("le chat noir", "the black cat"), ("le chien", "the dog")] * 3 + [
        ("un oiseau", "a bird")
    ]
    path = text.write_pairs(tmp_path / "p.tsv", pairs)
    configs = (
        text.TokenizerConfig(kind="word"),
        text.TokenizerConfig.for_target(kind="char"),
    )
    streamed = learn_vocab.learn_pair_tokenizer(
        stream.pair_stream([str(path)]), *configs, sample_lines=None
    )
    built = text.PairTokenizer.build(pairs, *configs)
    assert streamed.config() == built.config()
    assert streamed.source.vocabulary.tokens == built.source.vocabulary.tokens
    sampled = learn_vocab.learn_pair_tokenizer(
        stream.pair_stream([str(path)]), *configs, sample_lines=2
    )
    assert "oiseau" not in sampled.source.vocabulary.tokens
    assert sampled.source.vocabulary.tokens == (
        text.PairTokenizer.build(pairs[:2], *configs).source.vocabulary.tokens
    )
    with pytest.raises(ValueError, match="sample_lines"):
        learn_vocab.learn_pair_tokenizer(
            stream.pair_stream([str(path)]), *configs, sample_lines=0
        )


def _ids(lengths):
    sources = [list(range(5, 5 + s)) for s, _ in lengths]
    targets = [list(range(7, 7 + t)) for _, t in lengths]
    return tf.data.Dataset.from_generator(
        lambda: zip(sources, targets, strict=True),
        output_signature=(
            tf.TensorSpec([None], tf.int32),
            tf.TensorSpec([None], tf.int32),
        ),
    )


def test_geometric_buckets_pad_short_pairs_less_than_even_ones():
    """Each pair lands in the first bucket it fits, so the padded size of the
    batches is a count over the pairs (NumPy below); on short pairs under long
    limits geometric buckets pad less than even ones."""
    rng = np.random.default_rng(1)
    lengths = [(int(rng.integers(1, 12)), int(rng.integers(1, 12))) for _ in range(320)]
    padded = {}
    for spacing in ("even", "geometric"):
        shapes = bucket_shapes(64, 64, 8, spacing=spacing)
        # target_out carries the </s>: one more than the target's ids.
        first = [
            next((s, t) for s, t in shapes if ls <= s and lt + 1 <= t)
            for ls, lt in lengths
        ]
        expected = sum(s + t for s, t in first)
        total = 0
        for inputs, target_out in batch_by_length(
            _ids(lengths),
            max_source_length=64,
            max_target_length=64,
            num_buckets=8,
            bucket_spacing=spacing,
            batch_size=16,
            drop_remainder=False,
        ).as_numpy_iterator():
            shape = (inputs["source"].shape[1], target_out.shape[1])
            for row_source, row_out in zip(inputs["source"], target_out, strict=True):
                own = ((row_source != 0).sum(), (row_out != 0).sum())
                assert shape == next(
                    (s, t) for s, t in shapes if own[0] <= s and own[1] <= t
                ), (own, shape, shapes)
            total += inputs["source"].size + target_out.size
        assert total == expected
        padded[spacing] = total
    real = sum(ls + lt + 1 for ls, lt in lengths)
    assert real < padded["geometric"] < 0.85 * padded["even"], (real, padded)


def test_batches_by_length_are_padded_to_their_bucket():
    rng = np.random.default_rng(0)
    lengths = [(int(rng.integers(1, 17)), int(rng.integers(1, 8))) for _ in range(200)]
    shapes = bucket_shapes(16, 8, 4)
    assert shapes == [(4, 2), (8, 4), (12, 6), (16, 8)]
    batches = list(
        batch_by_length(
            _ids(lengths),
            max_source_length=16,
            max_target_length=8,
            num_buckets=4,
            batch_size=8,
            drop_remainder=False,
        ).as_numpy_iterator()
    )
    seen = 0
    for inputs, target_out in batches:
        source, target_in = inputs["source"], inputs["target_in"]
        shape = (source.shape[1], target_in.shape[1])
        assert shape in shapes and target_out.shape == target_in.shape
        bucket = shapes.index(shape)
        for row_source, row_in, row_out in zip(
            source, target_in, target_out, strict=True
        ):
            n, m = int((row_source != PAD_ID).sum()), int((row_out != PAD_ID).sum())
            # The first bucket the pair fits, and padding only after the ids.
            first = next(i for i, (s, t) in enumerate(shapes) if n <= s and m <= t)
            assert first == bucket
            assert list(row_source[:n]) == list(range(5, 5 + n))
            assert row_in[0] == START_ID and row_out[m - 1] == END_ID
            assert list(row_in[1:m]) == list(row_out[: m - 1])
        seen += len(source)
    assert seen == len(lengths)  # nothing lost without drop_remainder
    with_budget = batch_by_length(
        _ids(lengths),
        max_source_length=16,
        max_target_length=8,
        num_buckets=4,
        batch_tokens=64,
        batch_multiple=2,
    )
    for inputs, _ in with_budget.as_numpy_iterator():
        rows, length = inputs["source"].shape
        assert rows == 64 // length // 2 * 2  # the budget, a multiple of 2
    static = batch_by_length(
        _ids(lengths),
        max_source_length=16,
        max_target_length=8,
        num_buckets=1,
        batch_size=8,
    )
    assert static.element_spec[0]["source"].shape.as_list() == [8, 16]
    with pytest.raises(ValueError, match="batch_tokens"):
        batch_by_length(
            _ids(lengths), max_source_length=16, max_target_length=8, batch_tokens=10
        )


def test_an_existing_file_is_read_before_it_is_tried_as_a_pattern(tmp_path):
    """A name with glob characters is that file (as a pattern it would not match
    itself); a pipe is refused by name, not called empty."""
    import os

    named = tmp_path / "pairs[1]*?.tsv"
    named.write_text("un\tone\n")
    assert stream.resolve_data_files(str(named)) == [str(named)]
    fifo = tmp_path / "pipe.tsv"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"pipe\.tsv is not a regular file"):
        stream.resolve_data_files(str(fifo))


def test_both_readers_name_a_latin1_file_alike_with_the_fix(tmp_path):
    """A file that is not UTF-8 gets one message from the stream and from the
    in-memory reader: the file and line, the line with its bad bytes replaced,
    and the iconv command that converts it."""
    path = tmp_path / "latin1.tsv"
    path.write_bytes("caf\u00e9\tcoffee\n".encode("latin-1"))
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        _pairs(stream.pair_stream([str(path)]))
    streamed = str(stream.malformed_line_error(caught.value))
    with pytest.raises(ValueError) as in_memory:
        text.read_pairs(path)
    assert streamed == str(in_memory.value)
    assert streamed.startswith(f"{path}:1: not valid UTF-8 (")
    assert "iconv -f LATIN1 -t UTF-8" in streamed
    assert streamed.endswith(": 'caf\ufffd\tcoffee'")


def test_a_long_bad_line_is_shown_cut_alike(tmp_path):
    path = tmp_path / "long.tsv"
    path.write_text("a\tb\n" + "x" * 100 + "\n", encoding="utf-8")
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        _pairs(stream.pair_stream([str(path)]))
    with pytest.raises(ValueError) as in_memory:
        text.read_pairs(path)
    assert str(stream.malformed_line_error(caught.value)) == str(in_memory.value)
    assert str(in_memory.value).endswith(": '" + "x" * 60 + "'")
