"""Whether a run's parts belong together."""

import json

import pytest

from keras_selfattn.run_directory.consistency import check_run_parts
from keras_selfattn.run_directory.damaged import RunPartsMismatch


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
    check_run_parts(_fake_run(tmp_path / "run"))


def test_a_vocabulary_that_is_not_the_models_names_both_files(tmp_path):
    run = _fake_run(tmp_path / "run", target=11, model_sizes=(12, 9))
    with pytest.raises(RunPartsMismatch) as error:
        check_run_parts(run)
    message = str(error.value)
    assert f"{run / 'target_vocab.txt'} holds 11 target tokens" in message
    assert f"{run / 'model.keras'} was built for 9" in message


def test_a_vocabulary_file_that_is_not_tokenizer_jsons_is_named(tmp_path):
    run = _fake_run(tmp_path / "run")
    (run / "source_vocab.txt").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(RunPartsMismatch, match=r"holds 2 tokens, but"):
        check_run_parts(run)


def test_config_json_settings_against_the_models_record(tmp_path):
    run = _fake_run(tmp_path / "run", num_hiddens=32)
    with pytest.raises(RunPartsMismatch) as error:
        check_run_parts(run)
    assert "config.json records num_hiddens=16" in str(error.value)
    assert "model.keras was built with num_hiddens=32" in str(error.value)
