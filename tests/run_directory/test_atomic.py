"""Writing a run's files atomically: the old file or the new one, never half."""

import pytest

from keras_selfattn.run_directory.atomic import (
    replace_atomically,
    write_text_atomically,
)
from keras_selfattn.run_directory.metrics import write_metrics


def test_a_failed_write_leaves_the_old_file_and_no_partial_one(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text("old\n")

    def fails(tmp):
        tmp.write_text("half")
        raise RuntimeError("stopped mid-write")

    with pytest.raises(RuntimeError):
        replace_atomically(fails, path)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_an_os_error_without_a_file_name_names_the_target(tmp_path):
    def full_disk(tmp):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError) as error:
        replace_atomically(full_disk, tmp_path / "model.keras")
    assert error.value.filename == str(tmp_path / "model.keras")


def test_text_and_metrics_land_whole(tmp_path):
    write_text_atomically(tmp_path / "a.txt", "ü\n")
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "ü\n"
    path = write_metrics(tmp_path, {"bleu": 1.5, "chrf": 20.0})
    assert path.read_text() == '{\n  "bleu": 1.5,\n  "chrf": 20.0\n}\n'
