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
