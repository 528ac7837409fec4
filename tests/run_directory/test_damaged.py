"""A damaged run file is one line: the file, the reason, what to do."""

import pytest

from keras_selfattn.run_directory.damaged import RunFileDamaged, read_run_json
from keras_selfattn.run_directory.layout import RunLayout, backup_file


def test_damaged_run_files_say_file_damaged_reason_and_what_to_do(tmp_path):
    run = RunLayout(tmp_path)
    run.data.write_text('{"fingerprint": "unterminated')
    with pytest.raises(RunFileDamaged) as error:
        read_run_json(run.data)
    assert str(error.value).startswith(f"{run.data}: damaged (Unterminated string")
    assert "restore it from a copy" in str(error.value)
    state = backup_file(run.worker_backup(0), 3, "state")
    state.parent.mkdir(parents=True)
    state.write_text("{")
    with pytest.raises(RunFileDamaged, match=r"remove .*epoch-00003\.\*"):
        read_run_json(state)
    with pytest.raises(FileNotFoundError):  # missing is not damaged
        read_run_json(tmp_path / "nothing.json")
