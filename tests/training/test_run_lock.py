"""One `train` at a time in a run directory: the lock, its holder, SIGKILL takeover."""

import json
import os
import pathlib
import shlex
import signal
import socket
import subprocess
import sys

import pytest

from keras_selfattn.training.resume import run_lock
from keras_selfattn.training.resume.run_state import claim_run_dir, run_dir_state
from tests.bad_input_cases import LOCK_HOLDER

REPO = pathlib.Path(__file__).resolve().parents[2]


def _holder(run_dir):
    process = subprocess.Popen(
        [sys.executable, str(LOCK_HOLDER), str(run_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert process.stdout.readline() == b"held\n"
    return process


def test_a_second_process_is_refused_with_the_holders_name(tmp_path):
    holder = _holder(tmp_path)
    try:
        with pytest.raises(run_lock.RunDirBusy) as raised:
            run_lock.RunLock.acquire(tmp_path)
        message = str(raised.value)
        assert f"host {socket.gethostname()}, process {holder.pid}, since 20" in message
        assert str(tmp_path / "train.lock") in message and "\n" not in message
        # The file says the same (what an operator reads).
        written = json.loads((tmp_path / "train.lock").read_text())
        assert written["pid"] == holder.pid
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    with run_lock.RunLock.acquire(tmp_path):  # it exited: the lock is free again
        pass


def test_a_lock_left_by_sigkill_is_taken_over(tmp_path):
    holder = _holder(tmp_path)
    holder.send_signal(signal.SIGKILL)
    assert holder.wait(timeout=60) == -signal.SIGKILL
    left = json.loads((tmp_path / "train.lock").read_text())
    assert left["pid"] == holder.pid  # the stale file is still there
    lock = run_lock.RunLock.acquire(tmp_path)
    assert json.loads((tmp_path / "train.lock").read_text())["pid"] == os.getpid()
    with pytest.raises(run_lock.RunDirBusy, match=f"process {os.getpid()},"):
        run_lock.RunLock.acquire(tmp_path)  # another open file: refused too
    lock.release()
    assert not (tmp_path / "train.lock").exists()
    lock.release()  # twice is harmless


def test_a_file_removed_while_waiting_is_not_held(tmp_path, monkeypatch):
    """Opened just before its holder removed it: the lock goes to a new file."""
    real_flock = run_lock.fcntl.flock
    calls = []

    def flock(fd, operation):
        if not calls:
            os.unlink(tmp_path / "train.lock")  # the holder releasing, right now
        calls.append(fd)
        return real_flock(fd, operation)

    monkeypatch.setattr(run_lock.fcntl, "flock", flock)
    lock = run_lock.RunLock.acquire(tmp_path)
    assert len(calls) == 2  # the first file was dropped
    monkeypatch.undo()
    with pytest.raises(run_lock.RunDirBusy):  # the file at the name is the held one
        run_lock.RunLock.acquire(tmp_path)
    lock.release()


def test_the_lock_file_is_no_part_of_the_run(tmp_path):
    run = tmp_path / "run"
    state, created, lock = run_lock.hold_and_claim_run_dir(run)
    assert (state, created) == ("new", True) and run_dir_state(run) == "new"
    (run / "model.keras").write_text("someone's model")
    with pytest.raises(ValueError, match="files that are not an interrupted run"):
        claim_run_dir(run)
    claim_run_dir(run, overwrite=True)  # empties the directory, but not the lock
    assert sorted(p.name for p in run.iterdir()) == ["train.lock"]
    with pytest.raises(run_lock.RunDirBusy):
        run_lock.hold_and_claim_run_dir(run)
    lock.release()
    assert list(run.iterdir()) == []


def test_a_refused_claim_releases_the_lock_and_removes_what_it_made(tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="files that are not an interrupted run"):
        run_lock.hold_and_claim_run_dir(tmp_path / "other")
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["notes.txt"]
    with pytest.raises(ValueError, match="a file, not a directory"):
        run_lock.hold_and_claim_run_dir(tmp_path / "other" / "notes.txt")


@pytest.mark.parametrize("path", ["gs://bucket/run", "s3://b/r", "hdfs://nn/runs/x"])
def test_a_remote_run_directory_is_refused(tmp_path, path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="must be a local path.*" + path):
        run_lock.hold_and_claim_run_dir(path)
    assert list(tmp_path.iterdir()) == []  # no local folder named "gs:"


# Two real `train` processes at once: tests/training/test_concurrent_trains.py.


def test_the_lock_records_the_whole_command_or_says_it_cut_it():
    from keras_selfattn.training.resume.run_lock import recorded_command

    argv = ["keras-selfattn", "train", "--data", "a b.tsv", *["--seed", "1"] * 100]
    assert recorded_command(argv) == shlex.join(argv)  # 1,200 characters: whole
    long = [*argv, "--out", "é" * 2000]
    cut = recorded_command(long)
    kept, mark = cut.split(" ... [cut: ")
    assert shlex.join(long).startswith(kept)
    assert mark == f"{len(shlex.join(long)) - len(kept)} more characters]"
    assert len(json.dumps(cut)) <= 3100
