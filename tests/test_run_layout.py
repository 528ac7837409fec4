"""The run directory's layout: one owner of its names, no TensorFlow."""

import json
import subprocess
import sys

import pytest

from keras_selfattn import run_layout
from keras_selfattn.models.config import ModelConfig
from keras_selfattn.run_layout import RunLayout
from keras_selfattn.training.config import TrainConfig


def test_the_paths_are_the_names_under_the_run_directory(tmp_path):
    run = RunLayout(tmp_path)
    assert run.model == tmp_path / "model.keras"
    assert run.test_split == tmp_path / "splits" / "test.tsv"
    assert run.worker_backup(1) == tmp_path / "backup" / "worker-1"
    assert run.checkpoint(120) == tmp_path / "checkpoints" / "step-00000120.keras"
    assert run_layout.checkpoint_step(run.checkpoint(120)) == 120
    assert run_layout.checkpoint_step(tmp_path / "step-x.keras") is None
    state = run_layout.backup_file(run.worker_backup(0), 3, "state")
    assert state.name == "epoch-00003.json"
    assert run_layout.backup_epoch(state) == 3


def test_a_bad_backup_part_is_named():
    with pytest.raises(ValueError, match="part='model'"):
        run_layout.backup_file("backup", 1, "model")


def test_reading_the_layout_imports_no_tensorflow_or_keras():
    code = (
        "import sys, keras_selfattn.run_layout; "
        "print(sorted({'tensorflow', 'keras'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_config_without_later_fields_reads_as_it_was_trained(tmp_path):
    path = tmp_path / "config.json"
    run_layout.save_run_config(path, ModelConfig(), TrainConfig())
    payload = json.loads(path.read_text())
    for name in TrainConfig.ADDED_LATER:
        del payload["train"][name]
    path.write_text(json.dumps(payload))
    _, train_config = run_layout.load_run_config(path)
    for name, value in TrainConfig.ADDED_LATER.items():
        assert getattr(train_config, name) == value


def test_a_damaged_config_is_one_line_naming_it(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model": ')
    with pytest.raises(ValueError, match="config.json is not a JSON configuration"):
        run_layout.load_run_config(path)


def _fake_run(root, source=12, target=9, model_sizes=(12, 9), num_hiddens=16):
    """A run folder of vocabulary files, tokenizer.json, config.json and a
    model.keras archive holding only its config.json (no model is built)."""
    import zipfile

    root.mkdir(parents=True, exist_ok=True)
    record = {}
    for side, size in (("source", source), ("target", target)):
        (root / f"{side}_vocab.txt").write_text(
            "".join(f"t{i}\n" for i in range(size)), encoding="utf-8"
        )
        record[side] = {"vocab_file": f"{side}_vocab.txt", "vocab_size": size}
    (root / "tokenizer.json").write_text(json.dumps(record))
    (root / "config.json").write_text(
        json.dumps({"model": {"num_hiddens": 16}, "train": {}})
    )
    config = {
        "class_name": "Seq2Seq",
        "config": {
            "source_vocab_size": model_sizes[0],
            "target_vocab_size": model_sizes[1],
            "config": {"num_hiddens": num_hiddens},
        },
    }
    with zipfile.ZipFile(root / "model.keras", "w") as archive:
        archive.writestr("config.json", json.dumps(config))
    return root


def test_run_parts_that_belong_together_pass(tmp_path):
    run_layout.check_run_parts(_fake_run(tmp_path / "run"))


def test_a_vocabulary_that_is_not_the_models_names_both_files(tmp_path):
    run = _fake_run(tmp_path / "run", target=11, model_sizes=(12, 9))
    with pytest.raises(run_layout.RunPartsMismatch) as error:
        run_layout.check_run_parts(run)
    message = str(error.value)
    assert f"{run / 'target_vocab.txt'} holds 11 target tokens" in message
    assert f"{run / 'model.keras'} was built for 9" in message


def test_a_vocabulary_file_that_is_not_tokenizer_jsons_is_named(tmp_path):
    run = _fake_run(tmp_path / "run")
    (run / "source_vocab.txt").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(run_layout.RunPartsMismatch, match=r"holds 2 tokens, but"):
        run_layout.check_run_parts(run)


def test_config_json_settings_against_the_models_record(tmp_path):
    run = _fake_run(tmp_path / "run", num_hiddens=32)
    with pytest.raises(run_layout.RunPartsMismatch) as error:
        run_layout.check_run_parts(run)
    assert "config.json records num_hiddens=16" in str(error.value)
    assert "model.keras was built with num_hiddens=32" in str(error.value)


def test_damaged_run_files_say_file_damaged_reason_and_what_to_do(tmp_path):
    run = run_layout.RunLayout(tmp_path)
    run.data.write_text('{"fingerprint": "unterminated')
    with pytest.raises(run_layout.RunFileDamaged) as error:
        run_layout.read_run_json(run.data)
    assert str(error.value).startswith(f"{run.data}: damaged (Unterminated string")
    assert "restore it from a copy" in str(error.value)
    state = run_layout.backup_file(run.worker_backup(0), 3, "state")
    state.parent.mkdir(parents=True)
    state.write_text("{")
    with pytest.raises(run_layout.RunFileDamaged, match=r"remove .*epoch-00003\.\*"):
        run_layout.read_run_json(state)
    with pytest.raises(FileNotFoundError):  # missing is not damaged
        run_layout.read_run_json(tmp_path / "nothing.json")


# history.csv: keyed by step; the files of older runs (keyed by epoch) still read.
OLD_HISTORY = (
    "epoch,loss,val_example_1,val_loss\n"
    '0,3.0,"a, b => c (reference: d)",2.9\n'
    "1,2.5,,nan\n"
    "2,2.4,x,2.2\n"
)


def test_history_rows_are_keyed_by_step_with_text_cells_kept(tmp_path):
    path = tmp_path / "history.csv"
    run_layout.append_history(path, {"loss": 3.0, "step": 4, "epoch": 0, "a": "x, y"})
    run_layout.append_history(path, {"val_loss": 2.0, "loss": 2.5, "step": 8})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "step,epoch,a,loss,val_loss"  # the key first, then sorted
    assert lines[1:] == ['4,0,"x, y",3.0,', "8,,,2.5,2.0"]  # a new column: added
    rows = run_layout.read_history(path)
    assert [row["step"] for row in rows] == ["4", "8"] and rows[0]["a"] == "x, y"
    assert not list(tmp_path.glob("tmp-*"))  # written under a temporary name
    columns = run_layout.history_columns(rows)
    assert columns["step"] == [4.0, 8.0] and columns["loss"] == [3.0, 2.5]
    assert "a" not in columns  # text
    assert columns["val_loss"][1] == 2.0 and columns["val_loss"][0] != 2.0  # NaN


def test_an_old_epoch_keyed_history_gets_its_steps_from_the_plan(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text(OLD_HISTORY + "x,1.0,,nan\n", encoding="utf-8")
    rows = run_layout.read_history(path)
    assert "step" not in rows[0]
    keyed = run_layout.history_with_steps(rows, lambda periods: periods * 5)
    assert [row["step"] for row in keyed] == [5, 10, 15, ""]  # "x": no epoch
    assert "step" not in rows[0]  # copied, not changed
    run_layout.write_history(path, keyed[:3])
    again = run_layout.read_history(path)
    assert path.read_text().splitlines()[0].startswith("step,epoch,")
    assert [row["step"] for row in again] == ["5", "10", "15"]
    assert again[0]["val_example_1"] == "a, b => c (reference: d)"
    # A file with steps already keeps them.
    assert run_layout.history_with_steps(again, lambda p: -1) == again


def test_no_history_reads_as_no_rows(tmp_path):
    assert run_layout.read_history(tmp_path / "history.csv") == []
    assert run_layout.history_columns([]) == {}
