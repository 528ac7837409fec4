"""The run directory's layout: the names, and the paths of one run."""

import ast
import pathlib

import pytest

from keras_selfattn.run_directory import layout
from keras_selfattn.run_directory.layout import (
    RunLayout,
    backup_epoch,
    backup_file,
    checkpoint_step,
)


def test_the_paths_are_the_names_under_the_run_directory(tmp_path):
    run = RunLayout(tmp_path)
    assert run.model == tmp_path / "model.keras"
    assert run.test_split == tmp_path / "splits" / "test.tsv"
    assert run.worker_backup(1) == tmp_path / "backup" / "worker-1"
    assert run.checkpoint(120) == tmp_path / "checkpoints" / "step-00000120.keras"
    assert checkpoint_step(run.checkpoint(120)) == 120
    assert checkpoint_step(tmp_path / "step-x.keras") is None
    state = backup_file(run.worker_backup(0), 3, "state")
    assert state.name == "epoch-00003.json"
    assert backup_epoch(state) == 3


def test_a_bad_backup_part_is_named():
    with pytest.raises(ValueError, match="part='model'"):
        backup_file("backup", 1, "model")


def test_the_run_directory_modules_import_no_tensorflow_or_keras():
    """Reading a run never pulls in the trainer: every module of the package
    imports only the standard library, the configuration dataclasses and the
    names of the files the library saves."""
    allowed_ours = {
        "keras_selfattn.config",
        "keras_selfattn.file_names",
    }
    package = pathlib.Path(layout.__file__).parent
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top not in {"tensorflow", "keras", "numpy"}, (path, name)
                if top == "keras_selfattn":
                    ours = name.startswith("keras_selfattn.run_directory")
                    assert ours or name in allowed_ours, (path, name)


def test_the_shortlist_table_has_its_name():
    run = RunLayout("runs/x")
    assert run.shortlist == pathlib.Path("runs/x") / layout.SHORTLIST_FILE
