"""A run's shortlist learned by streaming its recorded training split: the same
table as one counted from the training pairs by a separate reference; a missing
split refused in one line."""

import pathlib

import numpy as np
import pytest

from keras_selfattn import text
from keras_selfattn.models import ModelConfig
from keras_selfattn.run_directory.layout import CONFIG_FILE
from keras_selfattn.run_directory.settings import load_run_config, save_run_config
from keras_selfattn.text.shortlist import SHORTLIST_FILE, ShortlistTable
from keras_selfattn.training import TrainConfig
from keras_selfattn.training.data import run_data as run_data_lib
from keras_selfattn.training.data.run_shortlist import learn_run_shortlist
from keras_selfattn.training.data.run_tokenizer import load_or_learn_tokenizer


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory with its data record, tokenizer and configuration (no model)."""
    run_dir = tmp_path_factory.mktemp("run")
    config = TrainConfig(
        source_tokenizer="word", target_tokenizer="char", split_digits=True
    )
    pairs = text.load_bundled_dates()[:300]
    run_data = run_data_lib.prepare_run_data(pairs, run_dir, config)
    load_or_learn_tokenizer(None, run_dir, False, run_data, config)
    save_run_config(run_dir / CONFIG_FILE, ModelConfig(), config)
    return run_dir


def _reference(run_dir, per_source, frequent):
    """Counts by dictionaries over the training pairs, held in memory here."""
    _, config = load_run_config(run_dir / CONFIG_FILE)
    run_data = run_data_lib.prepare_run_data(
        str(run_dir / "pairs.tsv"), run_dir, config
    )
    tokenizer = text.PairTokenizer.load(run_dir)
    pairs = list(run_data_lib.training_pairs(run_data, config))
    # One encode call per side (a few hundred pairs): the counting is this
    # reference's own, by dictionaries.
    sources = tokenizer.source.encode([s for s, _ in pairs]).to_list()
    targets = tokenizer.target.encode([t for _, t in pairs]).to_list()
    pair_count, target_count = {}, {}
    for s_ids, t_ids in zip(sources, targets, strict=True):
        for t in t_ids:
            target_count[t] = target_count.get(t, 0) + 1
        for s in set(s_ids):
            for t in set(t_ids):
                pair_count[s, t] = pair_count.get((s, t), 0) + 1
    top = sorted(
        (t for t in target_count if t > 3), key=lambda t: (-target_count[t], t)
    )[:frequent]
    rows = {}
    for s in range(1, tokenizer.source_vocab_size):
        scored = sorted(
            (-c, t)
            for (s2, t), c in pair_count.items()
            if s2 == s and t > 3 and t not in top
        )
        rows[s] = [t for _, t in scored[:per_source]]
    return rows, sorted(top), len(pairs)


def test_learned_from_the_training_split(run_dir):
    table = learn_run_shortlist(run_dir, per_source=4, frequent=5)
    rows, top, n = _reference(run_dir, 4, 5)
    assert table.frequent.tolist() == top
    assert table.record["pairs_counted"] == n and 0 < n < 300  # held-out not counted
    for s, best in rows.items():
        assert table.candidates[s].tolist() == best + [3] * (4 - len(best))
    loaded = ShortlistTable.load(run_dir)
    np.testing.assert_array_equal(loaded.candidates, table.candidates)
    assert loaded.record["files"] == table.record["files"]
    assert loaded.record["learned_from"] == "the training split of the run"


def test_bad_arguments(run_dir, tmp_path):
    with pytest.raises(ValueError, match="frequent=0") as caught:
        learn_run_shortlist(run_dir, frequent=0)
    assert "\n" not in str(caught.value)
    with pytest.raises(FileNotFoundError, match="run_dir=") as caught:
        learn_run_shortlist(tmp_path)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / SHORTLIST_FILE).exists()


def test_relative_training_paths_resolve_from_another_directory(tmp_path, monkeypatch):
    """A run trained with relative paths (``data.json`` records them as given)
    learns the same table from another working directory: the names are found
    under the run directory's parents, where training ran; a file of other
    contents there is not taken."""
    workdir, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    workdir.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(workdir)
    config = TrainConfig(source_tokenizer="word", target_tokenizer="char")
    run_data = run_data_lib.prepare_run_data(
        text.load_bundled_dates()[:200], pathlib.Path("run"), config
    )
    assert not pathlib.Path(run_data.files[0]).is_absolute()
    load_or_learn_tokenizer(None, pathlib.Path("run"), False, run_data, config)
    save_run_config(pathlib.Path("run") / CONFIG_FILE, ModelConfig(), config)
    expected = learn_run_shortlist("run", per_source=3, frequent=4, save=False)
    monkeypatch.chdir(elsewhere)
    found = learn_run_shortlist(workdir / "run", per_source=3, frequent=4, save=False)
    np.testing.assert_array_equal(found.candidates, expected.candidates)
    np.testing.assert_array_equal(found.frequent, expected.frequent)
    assert found.record["files"] == [str(workdir / run_data.files[0])]
    # The recorded name under the run directory's parents, but other contents.
    recorded = workdir / run_data.files[0]
    recorded.write_text(recorded.read_text() + "one more\tpair\n")
    with pytest.raises(FileNotFoundError, match="is gone") as caught:
        learn_run_shortlist(workdir / "run", per_source=3, frequent=4, save=False)
    assert "\n" not in str(caught.value)


def test_training_writes_the_table_the_command_learns(run_dir, tmp_path):
    """`write_run_shortlist` (what training calls with the pairs it streams)
    writes the table `learn_run_shortlist` learns from the recorded split; the
    searches only read it (`read_run_shortlist`), and a run without one, or
    with one of another size, is refused in one line saying how to make it."""
    from keras_selfattn.inference import read_run_shortlist
    from keras_selfattn.training.data.run_shortlist import write_run_shortlist

    _, config = load_run_config(run_dir / CONFIG_FILE)
    copy = tmp_path / "copy"
    copy.mkdir()
    run_data = run_data_lib.prepare_run_data(
        str(run_dir / "pairs.tsv"), run_dir, config
    )
    tokenizer = text.PairTokenizer.load(run_dir)
    written = write_run_shortlist(copy, run_data, config, tokenizer)
    learned = learn_run_shortlist(run_dir, save=False)
    np.testing.assert_array_equal(written.candidates, learned.candidates)
    np.testing.assert_array_equal(written.frequent, learned.frequent)
    read = read_run_shortlist(copy)
    assert read.record["source"] == str(copy / SHORTLIST_FILE)
    assert read.record["learned_from"] == "the training split of the run"
    with pytest.raises(FileNotFoundError, match="keras-selfattn shortlist") as gone:
        read_run_shortlist(tmp_path)
    with pytest.raises(ValueError, match="--frequent 7") as other:
        read_run_shortlist(copy, frequent=7)
    for caught in (gone, other):
        assert "\n" not in str(caught.value)


def test_the_shortlist_command_writes_the_table_the_function_learns(run_dir, tmp_path):
    """``keras-selfattn shortlist --model RUN``: the run's table as
    `learn_run_shortlist` learns it, and one line saying what it counted; a
    directory without a run is one error line."""
    from tests.bad_input_cases import run_in_process

    done = run_in_process(
        ["shortlist", "--model", str(run_dir), "--per-source", "3", "--frequent", "4"]
    )
    assert done.status == 0, done
    _, _, n = _reference(run_dir, 3, 4)
    assert done.stdout == (
        f"{run_dir}: shortlist of 3 pieces per source piece + 4 most frequent, "
        f"from {n} training pairs\n"
    )
    written = ShortlistTable.load(run_dir)
    expected = learn_run_shortlist(run_dir, per_source=3, frequent=4, save=False)
    np.testing.assert_array_equal(written.candidates, expected.candidates)
    np.testing.assert_array_equal(written.frequent, expected.frequent)
    missing = run_in_process(["shortlist", "--model", str(tmp_path / "nothing")])
    assert missing.status != 0 and missing.stderr.count("\n") == 1, missing
    assert missing.stderr.startswith("keras-selfattn: "), missing
