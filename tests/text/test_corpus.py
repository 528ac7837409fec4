"""TSV pair files: reading, errors that name file and line, splits, length filters."""

import functools
import gzip
import operator

import pytest

from keras_selfattn.text.corpus import (
    PairSplits,
    filter_pairs_by_length,
    iter_pairs,
    read_pairs,
    split_pairs,
    write_pairs,
)


def _write(tmp_path, content, name="pairs.tsv"):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def test_reads_anki_format_ignoring_further_columns(tmp_path):
    path = _write(
        tmp_path,
        "\ufeffGo.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272\r\n"
        "\n"
        "  Hi. \t Salut !\r\n"
        "Run!\tCours !",  # no final newline
    )
    assert read_pairs(path) == [
        ("Go.", "Va !"),
        ("Hi.", "Salut !"),
        ("Run!", "Cours !"),
    ]
    assert read_pairs(path, max_pairs=2) == [("Go.", "Va !"), ("Hi.", "Salut !")]


@pytest.mark.parametrize(
    "content, line, problem",
    [
        ("a\tb\nno tab here\nc\td\n", 2, "no tab character"),
        ("a\tb\n\tonly target\n", 2, "empty source"),
        ("a\tb\nc\td\nonly source\t  \n", 3, "empty target"),
    ],
)
def test_malformed_line_error_names_file_and_line(tmp_path, content, line, problem):
    path = _write(tmp_path, content)
    with pytest.raises(ValueError) as info:
        read_pairs(path)
    message = str(info.value)
    assert f"pairs.tsv:{line}:" in message
    assert problem in message


def test_skip_malformed(tmp_path):
    path = _write(tmp_path, "a\tb\nbroken\nc\td\n")
    assert read_pairs(path, skip_malformed=True) == [("a", "b"), ("c", "d")]


def test_invalid_utf8_names_line(tmp_path):
    path = _write(tmp_path, b"a\tb\n\xff\tc\n")
    with pytest.raises(ValueError, match=r"pairs\.tsv:2: not valid UTF-8"):
        read_pairs(path)


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file_error(tmp_path, content):
    path = _write(tmp_path, content)
    with pytest.raises(ValueError, match=r"pairs\.tsv: no sentence pairs found"):
        read_pairs(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(
        FileNotFoundError, match="Sentence-pair file not found: .*nope.tsv"
    ):
        read_pairs(tmp_path / "nope.tsv")
    with pytest.raises(IsADirectoryError, match="got a directory"):
        read_pairs(tmp_path)


def test_iter_pairs_reads_as_it_goes_with_read_pairs_messages(tmp_path):
    """The streamed reader gives read_pairs' pairs; a bad line fails when it is
    reached (after the pairs before it), with read_pairs' message; a missing file
    or a directory fails at the call."""
    good = _write(tmp_path, "\ufeffGo.\tVa !\tx\r\n\n Hi. \t Salut !\nRun!\tCours !")
    assert list(iter_pairs(good)) == read_pairs(good)
    for content in ("a\tb\nc\td\nno tab here\n", b"a\tb\nc\td\n\xff\tc\n", "\n\n"):
        bad = _write(tmp_path, content, name="bad.tsv")
        with pytest.raises(ValueError) as expected:
            read_pairs(bad)
        read = iter_pairs(bad)
        got = []
        with pytest.raises(ValueError) as streamed:
            got.extend(read)
        assert str(streamed.value) == str(expected.value)
        assert got == ([] if content == "\n\n" else [("a", "b"), ("c", "d")])
    skipped = _write(tmp_path, "a\tb\nbroken\nc\td\n", name="skipped.tsv")
    assert list(iter_pairs(skipped, skip_malformed=True)) == [("a", "b"), ("c", "d")]
    with pytest.raises(FileNotFoundError, match="Sentence-pair file not found"):
        iter_pairs(tmp_path / "nope.tsv")
    with pytest.raises(IsADirectoryError, match="got a directory"):
        iter_pairs(tmp_path)
    packed = write_pairs(tmp_path / "p.tsv.gz", [("a", "b")] * 3)
    assert list(iter_pairs(packed)) == [("a", "b")] * 3


def test_write_read_round_trip_plain_and_gzip(tmp_path):
    pairs = [("l'été", "summer"), ("5 mars 2024", "2024-03-05")]
    plain = write_pairs(tmp_path / "p.tsv", pairs)
    assert plain.read_bytes() == "l'été\tsummer\n5 mars 2024\t2024-03-05\n".encode()
    assert read_pairs(plain) == pairs
    packed = write_pairs(tmp_path / "p.tsv.gz", pairs)
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    assert read_pairs(packed) == pairs
    with pytest.raises(ValueError, match="pair 0: the target must be non-empty"):
        write_pairs(tmp_path / "bad.tsv", [("a", "b\tc")])


PAIRS = [(f"source {i % 37}", f"target {i}") for i in range(200)]


def test_split_is_deterministic_and_sized():
    splits = split_pairs(PAIRS, (0.8, 0.1, 0.1), seed=3)
    assert isinstance(splits, PairSplits)
    assert splits == split_pairs(PAIRS, (0.8, 0.1, 0.1), seed=3)
    assert sorted(functools.reduce(operator.iadd, splits, [])) == sorted(PAIRS)
    # Whole source groups (here of 5-6 pairs) land near the requested fractions.
    assert abs(len(splits.train) - 160) <= 6
    assert abs(len(splits.validation) - 20) <= 6
    assert split_pairs(PAIRS, seed=4) != splits


def test_split_keeps_each_source_in_one_split_and_ignores_input_order():
    splits = split_pairs(PAIRS, seed=0)
    sources = [{s for s, _ in part} for part in splits]
    assert not (
        sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2]
    )
    shuffled = list(reversed(PAIRS))
    for a, b in zip(split_pairs(shuffled, seed=0), splits, strict=True):
        assert sorted(a) == sorted(b)


def test_split_exact_for_distinct_sources_and_validates_fractions():
    pairs = [(f"s{i}", "t") for i in range(1000)]
    assert [len(p) for p in split_pairs(pairs, (0.9, 0.05, 0.05))] == [900, 50, 50]
    assert [len(p) for p in split_pairs(pairs, (1.0, 0.0, 0.0))] == [1000, 0, 0]
    with pytest.raises(ValueError, match="summing to 1"):
        split_pairs(pairs, (0.5, 0.2, 0.2))
    with pytest.raises(ValueError, match="three non-negative"):
        split_pairs(pairs, (0.9, 0.1))


def test_filter_pairs_by_length():
    pairs = [("a b c", "x"), ("a", "x y z"), ("a b", "x y")]
    assert filter_pairs_by_length(pairs, max_source_tokens=2) == pairs[1:]
    assert filter_pairs_by_length(pairs, max_target_tokens=2) == [pairs[0], pairs[2]]
    assert (
        filter_pairs_by_length(pairs, max_source_tokens=3, count_tokens=len)
        == pairs[1:]
    )
