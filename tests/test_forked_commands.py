"""`tests.forked_commands`: a forked process answers as a started one would.

The references are the command line run in this process (`main(argv)`) and
what Python itself gives a started process (its status after a signal, an
uncaught exception, a closed descriptor).

In the slow tier, with the tests that fork their processes: a fast-tier run
starts no forking server (each costs an import of TensorFlow).
"""

import os
import signal
import subprocess

import pytest

from tests import forked_commands
from tests.bad_input_cases import run_in_process

pytestmark = pytest.mark.slow


def test_the_command_line_answers_as_it_does_in_process():
    """A usage error and ``--version``: the same lines and statuses as
    `keras_selfattn.cli.main` in this process."""
    for argv in (["translate"], ["--version"], ["train", "--epochs", "0"]):
        forked = forked_commands.run(
            ["-m", "keras_selfattn", *argv], capture_output=True, text=True
        )
        here = run_in_process(argv)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            here.status,
            here.stdout,
            here.stderr,
        ), argv


def test_a_signal_ends_the_process_as_it_ends_a_started_one():
    """SIGTERM (no handler) ends it by the signal; SIGINT raises
    KeyboardInterrupt, which Python, uncaught, turns back into the signal; the
    pid is the process's own (``os.getpid`` in it)."""
    code = "import os, sys, time; print(os.getpid(), flush=True); time.sleep(60)"
    for signum in (signal.SIGTERM, signal.SIGINT):
        process = forked_commands.Popen(
            ["-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert int(process.stdout.readline()) == process.pid
        assert process.poll() is None
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
        assert process.returncode == -signum, err
        process.stdout.close()


def test_statuses_streams_directory_and_environment(tmp_path):
    run = forked_commands.run
    assert run(["-c", "raise SystemExit(5)"]).returncode == 5
    killed = run(["-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert killed.returncode == -signal.SIGKILL
    failed = run(["-c", "raise ValueError('no')"], capture_output=True, text=True)
    assert failed.returncode == 1
    assert failed.stderr.rstrip().endswith("ValueError: no")

    echoed = run(
        ["-c", "import sys; sys.stdout.write(sys.stdin.read().upper())"],
        input=b"une ligne\n",
        capture_output=True,
    )
    assert echoed.stdout == b"UNE LIGNE\n"

    code = "import os, sys; print(os.getcwd(), os.environ['KSA_X'], sys.argv[1:])"
    placed = run(
        ["-c", code, "a", "b"],
        cwd=tmp_path,
        env=dict(os.environ, KSA_X="x"),
        capture_output=True,
        text=True,
    )
    assert placed.stdout.split(" ", 2) == [str(tmp_path), "x", "['a', 'b']\n"]

    closed = run(
        ["-c", "import os, sys; os.fstat(1) if sys.stdout is None else exit(9)"],
        closed=(1,),
        capture_output=True,
        text=True,
    )
    assert closed.returncode == 1 and "Bad file descriptor" in closed.stderr


def test_a_script_runs_as_main_beside_its_folder(tmp_path):
    (tmp_path / "helper.py").write_text("NAME = 'helper'\n")
    script = tmp_path / "script.py"
    script.write_text(
        "import sys, threading\nimport helper\n"
        "print(__name__, helper.NAME, sys.argv, threading.active_count())\n"
    )
    done = forked_commands.run(
        ["-u", str(script), "x"], capture_output=True, text=True, check=True
    )
    # One thread: the server started none before it forked.
    assert done.stdout == f"__main__ helper {[str(script), 'x']} 1\n"


def test_the_server_is_started_again_when_it_is_gone():
    forked_commands.run(["-c", "pass"], check=True)
    server = forked_commands._server().process
    server.kill()
    server.wait()
    assert forked_commands.run(["-c", "pass"]).returncode == 0
    assert forked_commands._server().process is not server


@pytest.mark.parametrize(
    "args", [["-X", "dev", "-c", "pass"], [], ["-m"], ["-W", "error", "x.py"]]
)
def test_what_it_cannot_run_is_refused_by_name(args):
    with pytest.raises(ValueError, match=r"-m MODULE, -c CODE or a script"):
        forked_commands.Popen(args)
    with pytest.raises(ValueError, match="no pass_fds"):
        forked_commands.Popen(["-c", "pass"], pass_fds=(3,))
