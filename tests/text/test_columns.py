"""Lines with more than two tab-separated columns: counted (once), or errors with
strict_columns.

The reference is Python's own ``str.split("\\t")`` over the file written here.
Multi30k's ``train.de`` line 7366 holds a tab inside quotes: the real case.
"""

import pytest
import tensorflow as tf

from keras_selfattn.text import stream

LINES = [
    "Go.\tVa !",
    'A "quoted\ttab" here\tEin "Tab\tim" Zitat',  # 4 columns
    "",
    "\t\t",  # blank (only whitespace): skipped, not counted
    "Hi.\tSalut.\tCC-BY 2.0",  # Tatoeba's attribution column
    "Run!\tCours !",
]


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _reference(lines):
    """(pairs, lines with more than two columns) as Python reads them."""
    pairs, extra = [], 0
    for line in lines:
        if not line.strip():
            continue
        columns = line.split("\t")
        extra += len(columns) > 2
        pairs.append((columns[0].strip(), columns[1].strip()))
    return pairs, extra


def _pairs(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def test_extra_columns_are_ignored_and_counted(tmp_path):
    path = _write(tmp_path / "p.tsv", LINES)
    counters = stream.StreamCounters.create()
    pairs = _pairs(stream.pair_stream([path], counters=counters))
    expected_pairs, expected_extra = _reference(LINES)
    assert pairs == expected_pairs
    assert counters.values()["extra_columns"] == expected_extra == 2
    assert counters.values()["malformed"] == 0


def test_strict_columns_makes_them_errors_with_file_and_line(tmp_path):
    path = _write(tmp_path / "p.tsv", LINES)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _pairs(stream.pair_stream([path], strict_columns=True))
    error = stream.malformed_line_error(raised.value)
    assert str(error).startswith(
        f"{path}:2: more than two tab-separated columns (4); expected "
        "'source<TAB>target' (strict_columns): 'A \"quoted"
    )


def test_strict_and_skip_malformed_skips_and_counts_them(tmp_path):
    path = _write(tmp_path / "p.tsv", LINES)
    counters = stream.StreamCounters.create()
    pairs = _pairs(
        stream.pair_stream(
            [path], strict_columns=True, skip_malformed=True, counters=counters
        )
    )
    assert pairs == [("Go.", "Va !"), ("Run!", "Cours !")]
    assert counters.values()["malformed"] == 2
    assert counters.values()["extra_columns"] == 0


@pytest.mark.parametrize("files", [1, 3])
def test_a_repeated_stream_counts_each_line_once(tmp_path, files):
    """Three passes over the data count the first pass's lines, and lose no pair."""
    names = [_write(tmp_path / f"p{i}.tsv", LINES) for i in range(files)]
    counters = stream.StreamCounters.create()
    repeated = stream.pair_stream(names, counters=counters, repeat=True, seed=3)
    one_pass = len(_reference(LINES)[0]) * files
    read = _pairs(repeated.take(3 * one_pass))
    assert counters.values()["extra_columns"] == 2 * files
    for start in range(0, 3 * one_pass, one_pass):  # each pass reads every line once
        assert sorted(read[start : start + one_pass]) == sorted(
            _reference(LINES)[0] * files
        )


def test_the_end_of_run_line():
    assert stream.extra_columns_report(1) == (
        "1 line had more than two tab-separated columns; columns after the second "
        "were ignored (--strict-columns makes them errors)"
    )
    assert stream.extra_columns_report(7).startswith("7 lines had more than two")
