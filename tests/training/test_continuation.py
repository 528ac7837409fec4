"""Continuing a finished run with more train_steps or epochs; anything else refused."""

import csv
import dataclasses
import json
import shutil
import types

import numpy as np
import pytest

from keras_selfattn import text
from keras_selfattn.run_directory.settings import load_run_config
from keras_selfattn.training import train
from keras_selfattn.training.resume.backup import (
    INPUT_PIPELINE,
    backed_up_epochs,
    read_backup,
)
from tests.bad_input_cases import TINY_RUN_ARGS, run_in_process
from tests.training import reference_run
from tests.training.reference_run import TINY_MODEL, tiny_train_config
from tests.training.test_train import weights

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return reference_run.pairs_file(tmp_path_factory)


@pytest.fixture(scope="module")
def eight_steps(tmp_path_factory, data):
    """A finished run of 8 steps (two periods of 4); the tests continue copies of it."""
    run = tmp_path_factory.mktemp("eight_steps") / "run"
    train(str(data), run, TINY_MODEL, tiny_train_config(train_steps=8), verbose=0)
    return run


@pytest.fixture(scope="module")
def twelve_steps(tmp_path_factory, data):
    """One uninterrupted run of 12 steps: what 8 steps continued to 12 must equal
    (read, never trained further; test_train.py's reference too)."""
    assert tiny_train_config().train_steps == 12
    return reference_run.twelve_steps(tmp_path_factory, data)


def _copy(run, tmp_path):
    """A copy of the finished ``run`` for one test to continue."""
    return shutil.copytree(run, tmp_path / "run")


def _rows(run):
    with open(run / "history.csv", newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def _column(rows, name):
    index = rows[0].index(name)
    return [float(row[index]) for row in rows[1:]]


def test_a_finished_run_trains_longer_and_keeps_what_it_had(
    tmp_path, data, eight_steps, twelve_steps, capsys
):
    run = _copy(eight_steps, tmp_path)
    before = _rows(run)
    assert [row[0] for row in before] == ["step", "4", "8"]
    assert backed_up_epochs(run / "backup" / "worker-0") == [2]
    finished = json.loads((run / "training.json").read_text())

    def refused(match, model=TINY_MODEL, data=data, **changes):
        with pytest.raises(ValueError, match=match):
            train(str(data), run, model, tiny_train_config(**changes), verbose=0)
        assert json.loads((run / "training.json").read_text()) == finished
        assert _rows(run) == before

    refused(r"holds a finished run.*larger --train-steps.*asks for 8", train_steps=8)
    refused(r"asks for 6", train_steps=6)
    refused(
        r"changes num_hiddens 16 -> 32",
        model=dataclasses.replace(TINY_MODEL, num_hiddens=32),
        train_steps=12,
    )
    refused(r"changes learning_rate 0.002 -> 0.001", learning_rate=1e-3, train_steps=12)
    other = text.write_pairs(tmp_path / "other.tsv", text.load_bundled_dates()[:310])
    refused(r"cannot continue on other data: --data file", data=other, train_steps=12)
    # The period must end where the backup was taken: 8 steps by 3 do not.
    refused(r"pass --eval-every 4 --save-every 4", train_steps=12, eval_every=3)

    capsys.readouterr()
    result = train(
        str(data), run, TINY_MODEL, tiny_train_config(train_steps=12), verbose=2
    )
    out = capsys.readouterr().out
    assert out.count("continuing the finished run") == 1
    assert f"continuing the finished run in {run} from step 8 to step 12" in out
    after = _rows(run)
    assert after[: len(before)] == before  # the history kept, not trained again
    assert [row[0] for row in after] == ["step", "4", "8", "12"]
    assert len(result.history["loss"]) == 1  # only the new period trained
    assert json.loads((run / "training.json").read_text())["steps"] == 12
    assert backed_up_epochs(run / "backup" / "worker-0") == [3]
    assert read_backup(run / "backup" / "worker-0", 3)["step"] == 12
    assert load_run_config(run / "config.json")[1] == tiny_train_config(train_steps=12)
    # The learning rate does not depend on the run's length (inverse square
    # root), so 8 steps continued to 12 are the 12 steps of one run: the same
    # weights, optimizer state, dropout masks and batches.
    assert tiny_train_config().lr_schedule == "inverse_sqrt"
    reference = twelve_steps.run_dir
    for name in ("epoch", "loss", "val_loss"):  # (not the timings)
        np.testing.assert_allclose(
            _column(_rows(reference), name), _column(after, name), rtol=1e-5
        )
    for got, expected in zip(weights(run), weights(reference), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # The best model is replaced only by a better one.
    now = json.loads((run / "training.json").read_text())
    assert now["best_by"] == finished["best_by"]
    if finished["best_by"] == "loss":
        assert now["best"] <= finished["best"]
    else:  # chrF or BLEU: higher is better
        assert now["best"] >= finished["best"]


def test_the_command_continues_a_finished_run_by_epochs(tmp_path, tmp_path_factory):
    """A copy of the command line's finished two-epoch run (shared with
    tests/test_cli.py): the same command is refused, one more epoch continues it."""
    shared = reference_run.command_line_run(tmp_path_factory)
    assert shared.status == 0, shared.stderr[-3000:]
    run = _copy(shared.root / "pristine", tmp_path)
    argv = ["train", "--data", str(shared.root / "pairs.tsv"), "--out", str(run)]
    argv += TINY_RUN_ARGS  # its options (and no figures: not looked at here)
    steps = json.loads((run / "training.json").read_text())["steps"]
    assert steps % 2 == 0
    same = run_in_process([*argv, "--epochs", "2"])
    assert same.status == 2 and "holds a finished run" in same.stderr, same
    longer = run_in_process([*argv, "--epochs", "3"])
    assert longer.status == 0, longer.stderr
    lines = [line for line in longer.stdout.splitlines() if "continuing" in line]
    expected = (
        f"continuing the finished run in {run} from step {steps} to "
        f"step {steps // 2 * 3} (its best model and history are kept)"
    )
    assert lines == [expected]
    assert json.loads((run / "training.json").read_text())["steps"] == (steps // 2 * 3)


@pytest.fixture(scope="module")
def an_older_run_continued(tmp_path_factory, data, eight_steps):
    """A copy of the finished 8-step run as an older version wrote it, continued
    to 12 steps: its history.csv keyed by epoch only (as runs wrote it before
    history was keyed by step) and its backup without `INPUT_PIPELINE` (its
    iterator checkpoint of the graph that counted every pass). One continuation
    for the two tests below, each checking what its change must give."""
    run = _copy(eight_steps, tmp_path_factory.mktemp("older"))
    rows = _rows(run)
    assert rows[0][:2] == ["step", "epoch"]
    old = [row[1:] for row in rows]  # Keras' CSVLogger: epoch, then sorted keys
    with open(run / "history.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(old)
    backup = run / "backup" / "worker-0"
    (last,) = backed_up_epochs(backup)
    state_file = backup / f"epoch-{last:05d}.json"
    state = json.loads(state_file.read_text())
    assert state.pop("input_pipeline") == INPUT_PIPELINE and state["input"]
    state_file.write_text(json.dumps(state))  # as an older version wrote it
    result = train(
        str(data), run, TINY_MODEL, tiny_train_config(train_steps=12), verbose=0
    )
    return types.SimpleNamespace(run=run, old_rows=old, result=result)


def test_a_run_written_before_history_had_steps_continues(an_older_run_continued):
    """A finished run whose history.csv is keyed by epoch only continues; its rows
    get their steps."""
    after = _rows(an_older_run_continued.run)
    assert [row[:2] for row in after] == [
        ["step", "epoch"],
        ["4", "0"],
        ["8", "1"],
        ["12", "2"],
    ]
    # the old rows' values kept
    assert [row[1:] for row in after[:3]] == an_older_run_continued.old_rows


def test_a_backup_of_an_older_input_graph_continues_by_replaying(
    an_older_run_continued, twelve_steps
):
    """A run backed up before `INPUT_PIPELINE` continues: the batches trained on
    are read again and skipped, and it ends with the weights of one 12-step run."""
    run, result = an_older_run_continued.run, an_older_run_continued.result
    reference = twelve_steps
    for got, expected in zip(weights(run), weights(reference.run_dir), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # Counted again from the start by the replay: the distinct pairs, as one run.
    assert result.summary["pairs_read"] == reference.summary["pairs_read"]
    backup = run / "backup" / "worker-0"
    assert read_backup(backup, 3)["input_pipeline"] == INPUT_PIPELINE


def _history_with_clock(run, cpu_seconds, wall_seconds):
    """The run's history.csv with its last row's clock columns set (as a long
    run's would read)."""
    rows = _rows(run)
    header = rows[0]
    if "wall_seconds" not in header:  # a run written before the column
        header.append("wall_seconds")
        for row in rows[1:]:
            row.append("")
    rows[-1][header.index("cpu_seconds")] = str(cpu_seconds)
    rows[-1][header.index("wall_seconds")] = str(wall_seconds)
    with open(run / "history.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def test_the_run_remembers_its_settings_and_data(tmp_path, twelve_steps):
    """``train --out RUN`` alone takes the run's settings and data: a flag that
    contradicts one is refused in one line, one that may change is applied, and
    the CPU and wall seconds go on counting from the run's history."""
    run = _copy(twelve_steps.run_dir, tmp_path)
    out = ["train", "--out", str(run)]

    contradiction = run_in_process([*out, "--num-hiddens", "32"])
    assert contradiction.status == 2, contradiction
    (line,) = contradiction.stderr.splitlines()
    assert "--num-hiddens 32" in line and "num_hiddens=16" in line, line
    assert "received 32" in line, line

    same = run_in_process(out)  # a finished run: nothing more to train
    assert same.status == 2 and "asks for 12" in same.stderr, same

    _history_with_clock(run, cpu_seconds=1e6, wall_seconds=2e6)
    longer = run_in_process([*out, "--train-steps", "16", "--quiet", "--no-figures"])
    assert longer.status == 0, longer.stderr[-3000:]
    remembered = [line for line in longer.stdout.splitlines() if "recorded" in line]
    assert remembered == [
        (
            f"{run} holds a finished run: using the settings and data it recorded "
            "(config.json, data.json); changed: train_steps 12 -> 16"
        )
    ]
    assert load_run_config(run / "config.json")[1] == tiny_train_config(train_steps=16)
    rows = _rows(run)
    assert [row[0] for row in rows] == ["step", "4", "8", "12", "16"]
    last = dict(zip(rows[0], rows[-1], strict=True))
    assert 1e6 < float(last["cpu_seconds"]) < 1e6 + 600
    assert 2e6 < float(last["wall_seconds"]) < 2e6 + 600
    # The test scores, then where the run is: the last lines.
    tail = longer.stdout.splitlines()[-2:]
    assert tail[0].startswith("test split: chrF "), tail
    assert tail[1] == f"run directory: {run}", tail


def test_an_interrupted_run_resumes_with_its_settings(tmp_path, twelve_steps):
    """An interrupted run (its steps done, not yet marked finished) resumes from
    ``--out`` alone; its length is refused until it has finished."""
    run = _copy(twelve_steps.run_dir, tmp_path)
    (run / "training.json").unlink()  # as a kill before the end leaves it
    out = ["train", "--out", str(run), "--quiet", "--no-figures"]
    longer = run_in_process([*out, "--train-steps", "16"])
    assert longer.status == 2, longer
    (line,) = longer.stderr.splitlines()
    assert "--train-steps 16 contradicts the interrupted run" in line, line
    assert "train_steps=12" in line and "resume it first" in line, line

    resumed = run_in_process([*out, "--log-every", "1"])  # output only: applied
    assert resumed.status == 0, resumed.stderr[-3000:]
    assert (
        f"{run} holds an interrupted run: using the settings and data it recorded "
        "(config.json, data.json); changed: log_every 3 -> 1"
    ) in resumed.stdout
    assert json.loads((run / "training.json").read_text())["steps"] == 12
