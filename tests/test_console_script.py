"""The ``keras-selfattn`` console script honours a stopping signal from its start.

A real process runs what the installed script runs (setup.py's entry point); the
signal is sent once its handlers are in place (read from /proc), while Keras and
TensorFlow are still loading, before the command line's ``main``.
"""

import importlib.util
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from tests.test_packaging import setup_keywords

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_the_entry_point_is_the_module_beside_the_package():
    keywords = setup_keywords("py_modules", "entry_points")
    assert keywords["entry_points"] == {
        "console_scripts": ["keras-selfattn=keras_selfattn_command:main"]
    }
    assert keywords["py_modules"] == ["keras_selfattn_command"]


def test_importing_the_script_loads_the_standard_library_only():
    code = (
        "import sys, keras_selfattn_command\n"
        "heavy = {'keras', 'tensorflow', 'keras_selfattn', 'numpy'}\n"
        "heavy &= set(sys.modules)\n"
        "print(sorted(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        check=True,
        timeout=60,
    )
    assert result.stdout == "[]\n"


def _caught_signals(pid):
    """The signals process ``pid`` has handlers for (/proc/PID/status SigCgt)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigCgt:"):
                mask = int(line.split()[1], 16)
                return {s for s in signal.Signals if mask & (1 << (s - 1))}
    return set()


def _started_script(tmp_path):
    """The console script, as pip writes it and under its name (by which the
    command line knows itself: TensorFlow's import lines are filtered), running
    ``translate`` on a run directory that exists (its error would come after
    start-up)."""
    script = tmp_path / "keras-selfattn"
    script.write_text(
        "import sys\n"
        "from keras_selfattn_command import main\n"
        "if __name__ == '__main__':\n"
        "    sys.exit(main())\n"
    )
    return subprocess.Popen(
        [sys.executable, str(script), "translate", "--model", str(tmp_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=tmp_path,
    )


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
@pytest.mark.parametrize(
    "signum, status, line",
    [
        (signal.SIGINT, 130, "keras-selfattn: interrupted while starting"),
        (signal.SIGTERM, 143, "keras-selfattn: interrupted by SIGTERM while starting"),
        (signal.SIGHUP, 129, "keras-selfattn: interrupted by SIGHUP while starting"),
    ],
)
def test_a_signal_while_keras_loads_stops_in_one_line(tmp_path, signum, status, line):
    process = _started_script(tmp_path)
    try:
        deadline = time.monotonic() + 30
        while signal.SIGHUP not in _caught_signals(process.pid):  # the last one set
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(0.3)  # Keras and TensorFlow are loading (seconds)
        started = time.monotonic()
        process.send_signal(signum)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert time.monotonic() - started < 5  # at once, not after the imports
    assert process.returncode == status
    assert err.decode() == f"{line}; nothing was done\n"
    assert out == b""


def test_python_m_runs_the_same_command():
    result = subprocess.run(
        [sys.executable, "-m", "keras_selfattn_command", "translate", "--help"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: keras-selfattn translate")
    assert result.stderr == ""  # TensorFlow's import lines filtered: a command line


_BLOCKED_COMMAND = """
import sys, time
from keras_selfattn.cli import commands

def _blocked(args):  # a command's work: the signal comes while it runs
    print("running", flush=True)
    time.sleep(120)

commands._run = _blocked
sys.exit(commands.main(sys.argv[1:]))
"""


def test_any_command_stops_on_sigterm_in_one_line(tmp_path):
    """Not only train, translate and evaluate: whatever command runs, SIGTERM
    unwinds it (`stopping.signals_stop` around all of `main`, whatever the
    command: export here, which had no handler of its own), one line, 143."""
    argv = ["export", "--model", ".", "--export-dir", "exports"]
    process = subprocess.Popen(
        [sys.executable, "-c", _BLOCKED_COMMAND, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3"),
        cwd=tmp_path,
    )
    try:
        assert process.stdout.readline() == b"running\n"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 143
    lines = [line for line in err.decode().splitlines() if "keras-selfattn" in line]
    assert lines == ["keras-selfattn: interrupted by SIGTERM"], err.decode()[-2000:]
    assert "Traceback" not in err.decode()
    assert out == b""  # "running" was read before the signal


class _Ended(Exception):
    """What the patched ``os._exit`` raises, with the status it was given."""


class _Stream:
    def __init__(self, fails=False):
        self.flushed, self.fails = False, fails

    def flush(self):
        if self.fails:
            raise OSError("the reader went away")
        self.flushed = True


@pytest.mark.parametrize("returned", [False, True], ids=["exited", "returned"])
@pytest.mark.parametrize("status", [130, 143, 129])
def test_a_stopped_command_ends_flushed_without_finalizing(
    monkeypatch, status, returned
):
    """A signal's status ends the program with ``os._exit`` once stdout and stderr
    are flushed (a failing flush does not stop it): no interpreter finalization,
    whether `main` exits with the status or returns it (`translate` reports its
    own stop and returns 130 or 143)."""
    from keras_selfattn.cli import commands

    def stopped(args=None):
        if returned:
            return status
        raise SystemExit(status)

    def end(code):
        raise _Ended(code)

    out, err = _Stream(), _Stream(fails=True)
    monkeypatch.setattr(commands, "main", stopped)
    monkeypatch.setattr(commands.os, "_exit", end)
    monkeypatch.setattr(commands.sys, "stdout", out)
    monkeypatch.setattr(commands.sys, "stderr", err)
    with pytest.raises(_Ended) as ended:
        commands.run_program()
    assert ended.value.args == (status,)
    assert out.flushed


@pytest.mark.parametrize("status", [0, 1, 2, 70, 141])
def test_any_other_end_is_mains_status_at_once(monkeypatch, status):
    """Done, bad input, an internal error, a broken pipe: `main`'s return value
    or SystemExit, ended at once too (no finalization: a signal there would end
    the process by the signal itself, with no line)."""
    from keras_selfattn.cli import commands

    def ends(args=None):
        if status in (0, 1):
            return status
        raise SystemExit(status)

    def end(code):
        raise _Ended(code)

    monkeypatch.setattr(commands, "main", ends)
    monkeypatch.setattr(commands.os, "_exit", end)
    with pytest.raises(_Ended) as ended:
        commands.run_program()
    assert ended.value.args == (status,)


def test_a_stop_escaping_main_and_a_text_exit_end_as_python_would(monkeypatch, capsys):
    """A stop raised as `main`'s own handlers are undone (its work done) gets the
    command's line and its status; a SystemExit with a text prints it and ends
    with 1, as Python's own exit does; a stderr that cannot be written to loses
    the line, not the status."""
    from keras_selfattn.cli import commands

    def end(code):
        raise _Ended(code)

    def stopped_as_it_ends(args=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(commands.os, "_exit", end)
    monkeypatch.setattr(commands, "main", stopped_as_it_ends)
    with pytest.raises(_Ended) as ended:
        commands.run_program()
    assert ended.value.args == (130,)
    assert capsys.readouterr().err == (
        "keras-selfattn: interrupted as it ended; its work was done\n"
    )

    def exits_with_a_text(args=None):
        raise SystemExit("no such run")

    monkeypatch.setattr(commands, "main", exits_with_a_text)
    with pytest.raises(_Ended) as ended:
        commands.run_program()
    assert ended.value.args == (1,)
    assert capsys.readouterr().err == "no such run\n"

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(commands.os, "write", full)
    with pytest.raises(_Ended) as ended:
        commands._end_now(143, "keras-selfattn: interrupted by SIGTERM\n")
    assert ended.value.args == (143,)


# The console script run as pip's script runs it; at exit, the heavy packages
# loaded (none is the point).
_LOADED_AT_EXIT = """
import atexit, sys
def _loaded():
    heavy = {name.split(".")[0] for name in sys.modules}
    heavy &= {"keras", "tensorflow", "numpy", "jax"}
    print("loaded:", ",".join(sorted(heavy)), file=sys.__stderr__)
atexit.register(_loaded)
sys.argv = ["keras-selfattn", *sys.argv[1:]]
from keras_selfattn_command import main
sys.exit(main())
"""


@pytest.mark.parametrize(
    "argv, status, stream, first",
    [
        (["--help"], 0, "stdout", "usage: keras-selfattn [-h]"),
        (["train", "--help"], 0, "stdout", "usage: keras-selfattn train"),
        (["--version"], 0, "stdout", "keras-selfattn "),
        (
            ["train", "--data", "x.tsv", "--out", "r", "--epoch", "2"],
            2,
            "stderr",
            (
                "keras-selfattn train: error: unrecognized arguments: --epoch 2; "
                "did you mean --epochs?"
            ),
        ),
    ],
    ids=["help", "train-help", "version", "usage-error"],
)
def test_help_and_usage_errors_load_no_keras(tmp_path, argv, status, stream, first):
    """Each a fresh process, as a user typing the command starts: the parser is
    Keras-free and the package's ``__init__`` (Keras) runs only for a command."""
    done = subprocess.run(
        [sys.executable, "-c", _LOADED_AT_EXIT, *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == status, done.stderr[-2000:]
    *lines, loaded = done.stderr.splitlines()
    assert loaded == "loaded: ", done.stderr[-2000:]
    assert getattr(done, stream).startswith(first), getattr(done, stream)[-2000:]
    assert len(lines) == (status != 0)  # a usage error: one line


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="has torch")
def test_a_backend_that_is_not_installed_is_one_line_then_tensorflow(tmp_path):
    """KERAS_BACKEND=torch without torch: one line, and the command runs on
    TensorFlow (build-vocab on two pairs), not a MissingBackendError traceback."""
    (tmp_path / "pairs.tsv").write_text("a b\tc d\ne f\tg h\n")
    script = tmp_path / "keras-selfattn"
    script.write_text(
        "import sys\nfrom keras_selfattn_command import main\nsys.exit(main())\n"
    )
    done = subprocess.run(
        [sys.executable, str(script), "build-vocab", "--data", "pairs.tsv"]
        + ["--out", "vocab"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO), KERAS_BACKEND="torch"),
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = done.stderr.splitlines()
    assert line == (
        "keras-selfattn: the command line runs on TensorFlow, not 'torch' "
        "(KERAS_BACKEND=torch is set): using TensorFlow"
    )
    assert (tmp_path / "vocab" / "tokenizer.json").is_file()
