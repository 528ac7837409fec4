"""What `train` says and leaves when a call fails or is interrupted before it
trains: the advice of `TrainInterrupted`, read from the run directory's state; a
failed call into an empty directory leaving it empty; a global batch that does
not split over the replicas. No model is trained here."""

import json
from types import SimpleNamespace

import pytest

from keras_selfattn import text
from keras_selfattn.run_directory.layout import (
    BACKUP_DIR,
    FINISHED_FILE,
    LOCK_FILE,
    backup_file,
    worker_backup_dir,
)
from keras_selfattn.training import TrainConfig
from keras_selfattn.training.fit import train as train_module
from keras_selfattn.training.fit.step_plan import plan_steps
from keras_selfattn.training.fit.train import TrainInterrupted
from tests.bad_input_cases import TINY_RUN_ARGS, run_in_process

CONFIG = TrainConfig(train_steps=12, eval_every=4, save_every=4, patience=2)
PLAN = plan_steps(CONFIG, None)  # periods of 4 steps, 12 in all


def _place(run_dir, is_chief=True):
    return SimpleNamespace(
        run_dir=run_dir,
        backup_dir=worker_backup_dir(run_dir / BACKUP_DIR, 0),
        role=SimpleNamespace(is_chief=is_chief, index=0),
    )


def _backup(place, epoch, state):
    """A backup of ``epoch`` (its weights file's content is not read here)."""
    place.backup_dir.mkdir(parents=True, exist_ok=True)
    backup_file(place.backup_dir, epoch, "weights").write_bytes(b"")
    backup_file(place.backup_dir, epoch, "state").write_text(state)


def _advice(place, plan):
    """What `TrainInterrupted` says after a Ctrl-C on the chief."""
    call = SimpleNamespace(train_config=CONFIG)
    with (
        pytest.raises(TrainInterrupted) as interrupted,
        train_module._rerun_named(call, place, plan),
    ):
        raise KeyboardInterrupt
    assert str(interrupted.value) == interrupted.value.rerun
    return interrupted.value.rerun


def test_the_interrupt_says_what_the_same_call_does_next(tmp_path):
    place = _place(tmp_path)
    assert _advice(place, PLAN) == "nothing saved yet: the rerun starts from step 0"

    _backup(place, 1, json.dumps({"epoch": 1, "wait": 0}))
    # Before the data stage has planned the steps: the last backup, unnamed.
    assert _advice(place, None) == (
        "rerun the same command to resume from its last backup"
    )
    assert _advice(place, PLAN) == "rerun the same command to resume from step 4"

    _backup(place, 2, json.dumps({"epoch": 2, "wait": 2}))  # patience reached
    assert _advice(place, PLAN) == (
        "its 8 steps are done: rerun the same command to finish the run (its last "
        "validation, test metrics and any figures)"
    )
    # A damaged backup is not a finished run: the rerun says so when it reads it.
    backup_file(place.backup_dir, 2, "state").write_text('{"epoch": 2, "wa')
    assert _advice(place, PLAN) == "rerun the same command to resume from step 8"

    (tmp_path / FINISHED_FILE).write_text(json.dumps({"steps": 8}))
    assert _advice(place, PLAN) == f"the run is finished and complete in {tmp_path}"


def test_another_worker_s_interrupt_is_left_to_its_own_handling(tmp_path):
    """Only the chief's interrupt becomes `TrainInterrupted` (the chief speaks
    for the run); another worker's KeyboardInterrupt passes unchanged."""
    interrupt = KeyboardInterrupt("worker 1")
    place = _place(tmp_path, is_chief=False)
    with (
        pytest.raises(KeyboardInterrupt) as raised,
        train_module._rerun_named(None, place, PLAN),
    ):
        raise interrupt
    assert raised.value is interrupt


@pytest.mark.parametrize("failure", ["malformed line", "no pair fits"])
def test_a_failed_run_in_an_empty_directory_leaves_it_empty(failure, tmp_path):
    """``train --out DIR`` into an empty directory that fails before its first
    backup removes what it wrote there (a malformed line: nothing yet; no pair
    that fits the model: its data record, vocabularies and settings), and keeps
    the directory, which it did not create."""
    pairs = text.load_bundled_dates()[:30]
    data = tmp_path / "pairs.tsv"
    lines = [f"{source}\t{target}" for source, target in pairs]
    argv = ["--train-steps", "2", "--quiet"]
    if failure == "malformed line":
        lines[20] = "no tab on this line"
        said = f"{data}:21: "
    else:
        argv += ["--max-source-len", "1", "--max-target-len", "1"]
        said = "No training pair fits the model: "
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    result = run_in_process(
        ["train", "--data", str(data), "--out", str(run), *TINY_RUN_ARGS, *argv]
    )
    assert result.status == 2, result
    (line,) = result.stderr.splitlines()
    assert said in line, line
    assert run.is_dir()
    assert sorted(p.name for p in run.iterdir()) in ([], [LOCK_FILE])


def test_a_batch_that_does_not_split_over_the_replicas_is_refused(
    tmp_path, monkeypatch
):
    """``--batch-size`` is the global batch: on 3 replicas (a stand-in strategy,
    this host has one device) 32 is refused by name before anything is written."""
    asked = []

    def three_replicas(name, **options):
        asked.append(name)
        return SimpleNamespace(num_replicas_in_sync=3)

    monkeypatch.setattr(train_module, "get_strategy", three_replicas)
    data = text.write_pairs(tmp_path / "pairs.tsv", text.load_bundled_dates()[:30])
    run = tmp_path / "run"
    result = run_in_process(
        ["train", "--data", str(data), "--out", str(run), *TINY_RUN_ARGS]
        + ["--strategy", "mirrored", "--batch-size", "32", "--train-steps", "2"]
    )
    assert asked == ["mirrored"]
    assert result.status == 2, result
    (line,) = result.stderr.splitlines()
    assert line.startswith("keras-selfattn: error: "), line
    # The option and the value, in the command line's words.
    assert "error: --batch-size is the global batch" in line, line
    assert "must split evenly across the 3 replicas" in line, line
    assert line.endswith("Received: --batch-size 32"), line
    assert not run.exists()
