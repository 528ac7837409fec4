"""``keras-selfattn check-serving`` stopped by a real SIGTERM, SIGINT or SIGHUP
while its replay child runs: it exits 143, 130 or 129 with one line, no child
survives it and its temporary folder in TMPDIR is gone (check-serving forked
from a process that has imported TensorFlow: `tests.forked_commands`)."""

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from tests import forked_commands

REPO = pathlib.Path(__file__).resolve().parents[2]
REPLAY_SCRIPT = "session_replay.py"


def children(pid):
    """The ids of the live processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:  # it ended meanwhile
            continue
        fields = dict(
            line.split(":\t", 1) for line in status.splitlines() if ":\t" in line
        )
        if fields.get("PPid", "").strip() == str(pid):
            found.append(int(entry.name))
    return found


def command_line(pid):
    try:
        return (pathlib.Path("/proc", str(pid), "cmdline")).read_bytes().decode()
    except OSError:
        return ""


def wait_for_replay_child(process, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        for child in children(process.pid):
            if REPLAY_SCRIPT in command_line(child):
                return child
        time.sleep(0.05)
    raise AssertionError("the replay child never started")


def alive(pid):
    """True while ``pid`` runs (a zombie has ended)."""
    try:
        state = pathlib.Path("/proc", str(pid), "stat").read_text().split(") ")[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.slow  # each waits for check-serving to start its replay child
@pytest.mark.parametrize(
    ("signum", "status"),
    [
        (signal.SIGTERM, 143),
        (signal.SIGINT, 130),
        (signal.SIGHUP, 129),
    ],
    ids=["SIGTERM", "SIGINT", "SIGHUP"],
)
def test_stopped_check_serving_leaves_no_child_and_no_files(
    core_export, tmp_path, signum, status
):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(scratch))
    process = forked_commands.command(
        ["check-serving", str(core_export)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # the signal reaches check-serving alone
    )
    try:
        replay = wait_for_replay_child(process)
        assert any(scratch.iterdir()), "the replay's temporary folder is in TMPDIR"
        os.kill(process.pid, signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    name = signal.Signals(signum).name
    assert process.returncode == status, stderr[-2000:]
    expected = (
        f"keras-selfattn: check-serving stopped by {name}: its replay process "
        "ended and its temporary files were removed"
    )
    assert stderr.strip().splitlines() == [expected]
    assert "Traceback" not in stdout
    assert not alive(replay), f"the replay child {replay} survived"
    assert list(scratch.iterdir()) == []


def test_a_signal_while_a_child_starts_leaves_no_child(monkeypatch):
    """A signal that arrives while ``Popen`` starts a child (check-serving's
    replay, the op-registry listing: after the fork, before ``Popen`` returns)
    is raised once the child is held, and the child is ended: raised inside
    ``Popen`` it left a child nobody held (`stopping.run_to_the_end`)."""
    from keras_selfattn import stopping

    started, popen = [], subprocess.Popen

    def popen_then_signal(*args, **kwargs):
        child = popen(*args, **kwargs)
        started.append(child)
        os.kill(os.getpid(), signal.SIGTERM)  # as if it came before the return
        return child

    monkeypatch.setattr(stopping.subprocess, "Popen", popen_then_signal)
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(stopping.Stopped), stopping.signals_stop():
        stopping.run_to_the_end(sleeper, dict(os.environ), timeout=60)
    assert len(started) == 1
    assert started[0].poll() is not None, "the child still runs"
