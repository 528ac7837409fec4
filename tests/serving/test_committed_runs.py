"""The committed tiny runs (tests/serving/data) still match the code that reads
them: the files the run layout names, the settings today's configuration writes,
and every part read back by today's readers. When one does not, the failure says
to rebuild them with `python -m tests.serving.make_tiny_runs`."""

import json
import shutil

import pytest

from keras_selfattn import text
from keras_selfattn.cli import errors
from keras_selfattn.inference import load_translator
from keras_selfattn.run_directory import layout
from keras_selfattn.run_directory.history import history_columns, read_history
from keras_selfattn.run_directory.settings import load_run_config
from keras_selfattn.text.shortlist import ShortlistTable
from tests.serving import tiny_runs


@pytest.mark.parametrize("name", sorted(tiny_runs.COMMITTED_RUNS))
def test_a_committed_run_has_the_layouts_files_and_todays_settings(name):
    reasons = tiny_runs.stale_reasons(name)
    assert not reasons, tiny_runs.stale_message(name, reasons)


def test_a_stale_run_names_what_differs_and_the_command_that_rebuilds_it(tmp_path):
    run_dir = shutil.copytree(tiny_runs.DATA_DIR / "core_run", tmp_path / "core_run")
    config_file = run_dir / layout.CONFIG_FILE
    settings = json.loads(config_file.read_text(encoding="utf-8"))
    settings["train"]["epochs"] += 1
    settings["train"]["a_later_field"] = 1
    config_file.write_text(json.dumps(settings), encoding="utf-8")
    (run_dir / layout.SHORTLIST_FILE).unlink()
    (reason_files, reason_config) = tiny_runs.stale_reasons("core_run", run_dir)
    assert layout.SHORTLIST_FILE in reason_files
    assert "'train'" in reason_config and "['a_later_field', 'epochs']" in reason_config
    message = tiny_runs.stale_message("core_run", [reason_files, reason_config])
    assert "`python -m tests.serving.make_tiny_runs`" in message


@pytest.mark.parametrize("name", sorted(tiny_runs.COMMITTED_RUNS))
def test_todays_readers_read_every_part_of_a_committed_run(name, tmp_path):
    """Its parts belong together, and each reader of a finished run reads its
    file: the settings, the model and tokenizers (a `Translator` that tells the
    held-out sentences apart), the shortlist table, the splits, the history and
    the finished record. (About 2 CPU-s a run: in the fast tier, so that a change
    of a reader fails while editing, not only in the slow tier's exports.)"""
    run_dir = shutil.copytree(tiny_runs.DATA_DIR / name, tmp_path / name)
    run = layout.RunLayout(run_dir)
    try:
        errors.check_run_directory(run_dir)
        model_config, train_config = load_run_config(run.config)
        translator = load_translator(run_dir)
        sources = [source for source, _ in text.read_pairs(run.test_split)[:16]]
        translations = [t.text for t in translator.translate(sources)]
        table = ShortlistTable.load(run_dir)
        validation = text.read_pairs(run.validation_split)
        history = history_columns(read_history(run.history))
        finished = json.loads(run.finished.read_text(encoding="utf-8"))
    except Exception as error:  # any reader that no longer reads its part
        raise AssertionError(
            tiny_runs.stale_message(name, [f"{type(error).__name__}: {error}"])
        ) from error
    expected = tiny_runs.tiny_configs(**tiny_runs.COMMITTED_RUNS[name])
    assert (model_config, train_config) == expected
    assert len(set(translations)) > 3, "the run should tell sentences apart"
    assert table.candidates.shape[0] == translator.tokenizer.source_vocab_size
    assert validation and len(history["loss"]) == train_config.epochs
    assert finished["finished"] is True
