"""MultiWorkerMirroredStrategy with two worker processes on 127.0.0.1, the real CLI.

One uninterrupted two-worker run is shared by the tests: both workers report the
same losses, the chief writes the run directory, the other worker's scratch
directory is gone, and with one data file a worker each (FILE auto-sharding)
each worker reads only its own file; a second run has a worker killed with SIGKILL
in its second epoch, after its first backup, the survivor fails within seconds
naming the lost peer, and the restarted job resumes from the backup, trains only
the lost epoch and ends with the uninterrupted run's weights. Then: stock Keras
fails without the keras#20585 fix, and a worker whose peer never starts fails
within its timeout, naming the address.
"""

import csv
import json
import pathlib
import re
import signal
import time

import keras
import numpy as np
import pytest

import keras_selfattn  # noqa: F401  (registers the layers for load_model)
from keras_selfattn import text
from keras_selfattn.training.resume.backup import backed_up_epochs
from tests.training.cluster import (
    CLI,
    TINY_CLI_ARGS,
    TRAIN_ONLY,
    Worker,
    failure_report,
    free_ports,
    once_per_test_run,
    subprocess_env,
    tf_config,
    wait_all,
    workers,
    write_pairs,
)
from tests.training.train_worker import KILLED_IN_PERIOD

pytestmark = pytest.mark.slow

# Two epochs: the kill lands in the second, after the first epoch's backup, so
# the restart resumes from a backup and trains only what was lost.
EPOCHS = 2
PAIRS = 160  # 128 for training: 4 steps of 32 per epoch
RUN_TIMEOUT = 420  # seconds for a whole two-worker run on two shared cores


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    return pathlib.Path(
        once_per_test_run(tmp_path_factory, "multi_worker_data", write_data)["path"]
    )


MALFORMED = 3  # lines without a tab, in the second file only


def write_data(directory):
    """Two files, a worker each: the second one alone holds malformed lines."""
    pairs = text.load_bundled_dates()[:PAIRS]
    first = write_pairs(directory / "a.tsv", pairs[: PAIRS // 2])
    second = write_pairs(directory / "b.tsv", pairs[PAIRS // 2 :])
    with open(second, "a", encoding="utf-8") as handle:
        handle.write("no tab on this line\n" * MALFORMED)
    return {"path": str(directory / "*.tsv"), "files": [str(first), str(second)]}


def train_args(data, run_dir, *extra):
    return [
        "train",
        "--data",
        str(data),
        "--skip-malformed",
        "--out",
        str(run_dir),
        "--epochs",
        str(EPOCHS),
        "--strategy",
        "multi_worker",
        "--worker-timeout",
        "120",
        *TINY_CLI_ARGS,
        *extra,
    ]


def worker_history(output):
    """The history a non-chief worker prints: ``worker 1 done; history: {...}``."""
    match = re.search(r"worker \d+ done; history: (\{.*\})", output)
    assert match, output[-3000:]
    return json.loads(match.group(1))


def chief_history(run_dir):
    with open(run_dir / "history.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    history = {
        key: [float(row[key]) for row in rows]
        for key in rows[0]
        if key != "epoch" and not key.startswith("val_example_")  # text columns
    }
    return history, [int(row["epoch"]) for row in rows]


def weights(run_dir):
    return keras.saving.load_model(run_dir / "model.keras").get_weights()


@pytest.fixture(scope="session")
def uninterrupted(tmp_path_factory, data):
    """One two-worker run of EPOCHS epochs (once per test run); a TMPDIR per worker."""
    result = once_per_test_run(
        tmp_path_factory,
        "multi_worker_uninterrupted",
        lambda directory: run_uninterrupted(directory, data),
    )
    return {
        **result,
        "run_dir": pathlib.Path(result["run_dir"]),
        "tmpdirs": [pathlib.Path(path) for path in result["tmpdirs"]],
    }


def run_uninterrupted(base, data):
    tmpdirs = [base / f"tmp{i}" for i in range(2)]
    for path in tmpdirs:
        path.mkdir(exist_ok=True)
    run_dir = base / "run"
    with workers(
        lambda i: train_args(data, run_dir),
        2,
        base,
        tag="uninterrupted",
        env_for=lambda i: {"TMPDIR": tmpdirs[i]},
    ) as (started, _):
        codes = wait_all(started, RUN_TIMEOUT)
        outputs = [worker.output for worker in started]
        assert codes == [0, 0], failure_report(started)
    return {
        "run_dir": str(run_dir),
        "outputs": outputs,
        "tmpdirs": [str(path) for path in tmpdirs],
    }


def test_both_workers_report_the_same_losses_and_the_chief_writes(uninterrupted):
    run_dir = uninterrupted["run_dir"]
    history, epochs = chief_history(run_dir)
    assert epochs == list(range(EPOCHS))
    other = worker_history(uninterrupted["outputs"][1])
    for key in ("loss", "val_loss", "accuracy", "val_accuracy"):
        assert other[key] == history[key], (
            key
        )  # all-reduced: identical, not merely close
    assert history["loss"][-1] < history["loss"][0]
    for name in (
        "model.keras",
        "config.json",
        "history.csv",
        "metrics.json",
        "tokenizer.json",
        "splits/validation.tsv",
    ):
        assert (run_dir / name).exists(), name
    for worker in (0, 1):  # every worker kept only its newest backup at the end
        assert len(backed_up_epochs(run_dir / "backup" / f"worker-{worker}")) == 1
    assert (
        "run directory:" in uninterrupted["outputs"][0]
        and "run directory:" not in uninterrupted["outputs"][1]
    )
    assert "Traceback" not in uninterrupted["outputs"][0] + uninterrupted["outputs"][1]
    # The other worker wrote into a scratch directory under its TMPDIR, removed at the
    # end.
    assert not [
        p
        for p in uninterrupted["tmpdirs"][1].iterdir()
        if p.name.startswith("keras-selfattn-worker")
    ]


def test_each_worker_reads_only_its_own_file(uninterrupted):
    """FILE auto-sharding: two files, two workers; only worker 1 meets b.tsv's errors.

    With DATA sharding every worker would read both files and skip their
    malformed lines; here the chief (worker 0, a.tsv) skips none and worker 1
    (b.tsv) skips the file's malformed lines on every pass over it.
    """
    run_dir = uninterrupted["run_dir"]
    finished = json.loads((run_dir / "training.json").read_text(encoding="utf-8"))
    assert finished["malformed_lines_skipped"] == 0 and finished["pairs_read"] > 0
    match = re.search(
        r"worker 1 read (\d+) pairs \((\d+) malformed lines skipped",
        uninterrupted["outputs"][1],
    )
    assert match, uninterrupted["outputs"][1][-3000:]
    pairs_read, skipped = int(match.group(1)), int(match.group(2))
    assert pairs_read > 0 and skipped >= MALFORMED and skipped % MALFORMED == 0


def test_a_killed_worker_resumes_from_its_backup(tmp_path, data, uninterrupted):
    run_dir = tmp_path / "run"
    first_backup = run_dir / "backup" / "worker-1" / "epoch-00001.json"
    # The chief runs the command; worker 1 the same `train`, which SIGKILLs itself
    # after the first step of the second epoch (train_worker.py's KILLED_IN_PERIOD):
    # mid-training, after its first backup, on every run at the same step.
    with workers(
        lambda i: train_args(data, run_dir)[i:],  # train_worker.py: no "train"
        2,
        tmp_path,
        tag="killed",
        env_for=lambda i: {KILLED_IN_PERIOD: 1} if i == 1 else {},
        program_for=lambda i: TRAIN_ONLY if i == 1 else CLI,
    ) as (started, addresses):
        assert started[1].wait(RUN_TIMEOUT) == -signal.SIGKILL, failure_report(started)
        killed_at = time.monotonic()
        assert first_backup.exists(), failure_report(started)
        code = started[0].wait(120)
        survivor = started[0].output
        assert code is not None, "the surviving worker hung after its peer was killed"
    assert code == 2 and time.monotonic() - killed_at < 120
    assert f"lost contact with worker 1 at {addresses[1]}" in survivor, survivor[-3000:]
    assert "Traceback" not in survivor
    # The workers resume from the newest epoch both have a backup of: the first.
    resume_from = min(
        max(backed_up_epochs(run_dir / "backup" / f"worker-{i}")) for i in range(2)
    )
    assert resume_from == 1 < EPOCHS

    # Restart the job: `train` with the same arguments (the command without its final
    # evaluation).
    with workers(
        lambda i: train_args(data, run_dir)[1:],
        2,
        tmp_path,
        tag="resumed",
        program=TRAIN_ONLY,
    ) as (
        started,
        _,
    ):
        codes = wait_all(started, RUN_TIMEOUT)
        assert codes == [0, 0], failure_report(started)
        resumed = worker_history(started[1].output)
    history, epochs = chief_history(run_dir)
    assert epochs == list(range(EPOCHS))  # every planned epoch, each once
    assert (
        len(resumed["loss"]) == EPOCHS - resume_from
    )  # the restart trained only what was lost
    reference, _ = chief_history(uninterrupted["run_dir"])
    np.testing.assert_allclose(history["loss"], reference["loss"], rtol=1e-5)
    np.testing.assert_allclose(history["val_loss"], reference["val_loss"], rtol=1e-5)
    for got, expected in zip(
        weights(run_dir), weights(uninterrupted["run_dir"]), strict=True
    ):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    for worker in (0, 1):
        assert len(backed_up_epochs(run_dir / "backup" / f"worker-{worker}")) == 1


def test_stock_keras_fails_without_the_fix(tmp_path, data):
    """Proves the guard: on this Keras, the fix switched off brings keras#20585 back."""
    from keras_selfattn.training.distribute.keras_fix import (
        KERAS_FIX_ENV,
        keras_needs_multi_worker_fix,
    )

    if not keras_needs_multi_worker_fix():
        pytest.skip(f"keras {keras.__version__} is outside the fix's versions")
    with workers(
        lambda i: train_args(data, tmp_path / "run", "--epochs", "1"),
        2,
        tmp_path,
        env={KERAS_FIX_ENV: "off"},
        tag="stock",
    ) as (started, _):
        codes = wait_all(started, RUN_TIMEOUT)
        outputs = [worker.output for worker in started]
    assert all(code not in (0, None) for code in codes), failure_report(started)
    assert any(
        "Attempt to convert a value" in output and "PerReplica" in output
        for output in outputs
    )


def test_a_worker_without_its_peer_fails_in_bounded_time(tmp_path, data):
    addresses = [
        f"127.0.0.1:{port}" for port in free_ports(2)
    ]  # nobody will listen on the second
    worker = Worker(
        # One second: the property is a bounded wait naming the address, and the
        # test's process waits out the whole timeout.
        train_args(data, tmp_path / "run", "--worker-timeout", "1"),
        tmp_path / "alone.log",
        subprocess_env(TF_CONFIG=tf_config(addresses, 0)),
    )
    started_at = time.monotonic()
    try:
        code = worker.wait(120)
    finally:
        worker.stop()
    output = worker.output
    assert code == 2, output[-3000:]
    assert time.monotonic() - started_at < 120
    assert f"could not reach worker 1 at {addresses[1]} within 1 s" in output, output[
        -3000:
    ]
    assert "Traceback" not in output
