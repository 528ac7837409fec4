"""Helpers for tests that start training processes: ports, TF_CONFIG, the CLI, cleanup.

Every process starts in its own session (process group) and is killed with SIGKILL
when a test ends (TensorFlow's preemption watcher catches SIGTERM, so ``timeout``
and ``terminate()`` do not stop a worker that waits for its peer).
"""

import contextlib
import fcntl
import json
import os
import pathlib
import signal
import socket
import subprocess
import time

from tests import forked_commands

REPO = pathlib.Path(__file__).resolve().parents[2]

# The tiny model and a short run: seconds per epoch on two shared cores.
TINY_CLI_ARGS = [
    # A tiny model writes a few strings: the health check would end the run
    # with exit 3 (these runs test distribution, not translation).
    "--validation-translations",
    "0",
    "--best-by",
    "loss",
    "--num-hiddens",
    "16",
    "--num-heads",
    "2",
    "--num-layers",
    "1",
    "--ffn-hiddens",
    "32",
    "--decoder-units",
    "16",
    "--embedding-dim",
    "8",
    "--dropout",
    "0",
    "--max-source-len",
    "24",
    "--max-target-len",
    "12",
    "--batch-size",
    "32",
    "--warmup-steps",
    "2",
    "--seed",
    "3",
    "--target-tokenizer",
    "char",
    # The smallest graphs to trace: every worker process traces the tokenizer
    # and the model afresh, and tracing, not the few steps, is most of a run's
    # CPU. Core TensorFlow ops for the tokenizer (not tensorflow_text's), dot
    # attention scores and the decoder's state as its output.
    "--tokenizer-ops",
    "core",
    "--attention-score",
    "dot",
    "--no-attentional-output",
    "--no-jit-compile",
    # No plots (matplotlib's import and drawing): these runs' tests never look at
    # RUN_DIR/plots.
    "--no-figures",
]


def free_ports(count):
    """``count`` distinct free TCP ports on 127.0.0.1."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def tf_config(addresses, index):
    return json.dumps(
        {
            "cluster": {"worker": list(addresses)},
            "task": {"type": "worker", "index": index},
        }
    )


def subprocess_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update({key: str(value) for key, value in extra.items()})
    return env


def write_pairs(path, pairs):
    path.write_text(
        "".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8"
    )
    return path


CLI = ("-m", "keras_selfattn")  # the real command
TRAIN_ONLY = (
    str(pathlib.Path(__file__).with_name("train_worker.py")),
)  # `train` without the evaluation


class Worker:
    """One ``python -m keras_selfattn ARGS`` (or ``python PROGRAM ARGS``) process,
    forked from a server that has imported TensorFlow (`tests.forked_commands`:
    these tests are about distribution, not start-up).

    Its output goes to ``log``.
    """

    def __init__(self, args, log, env, program=CLI):
        self.log = pathlib.Path(log)
        self._handle = open(self.log, "wb")  # noqa: SIM115  (closed in stop())
        self.process = forked_commands.Popen(
            [*program, *args],
            cwd=REPO,
            env=env,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait(self, timeout):
        """The exit status, or None if still running after ``timeout`` seconds."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)

    def stop(self):
        if self.process.poll() is None:
            self.kill()
        self._handle.close()

    @property
    def output(self):
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextlib.contextmanager
def workers(
    args_for,
    count,
    log_dir,
    env=None,
    tag="run",
    env_for=None,
    program=CLI,
    program_for=None,
):
    """Starts ``count`` workers of one TF_CONFIG cluster; kills what is left on exit.

    ``args_for(index)`` gives worker ``index``'s CLI arguments; ``env`` extra
    environment variables, ``env_for(index)`` per-worker ones; ``program_for(index)``
    worker ``index``'s program (default: ``program`` for every worker).
    """
    addresses = [f"127.0.0.1:{port}" for port in free_ports(count)]
    started = []
    try:
        for index in range(count):
            extra = {**(env or {}), **(env_for(index) if env_for else {})}
            worker_env = subprocess_env(TF_CONFIG=tf_config(addresses, index), **extra)
            started.append(
                Worker(
                    args_for(index),
                    pathlib.Path(log_dir) / f"{tag}-worker{index}.log",
                    worker_env,
                    program_for(index) if program_for else program,
                )
            )
        yield started, addresses
    finally:
        for worker in started:
            worker.stop()


def wait_all(started, timeout):
    """Waits for every worker (``timeout`` seconds in all); returns their exit statuses.

    None: still running.
    """
    deadline = time.monotonic() + timeout
    return [worker.wait(max(0.1, deadline - time.monotonic())) for worker in started]


def failure_report(started):
    return "\n\n".join(
        f"--- {worker.log.name} (rc={worker.process.poll()}) ---\n"
        f"{worker.output[-4000:]}"
        for worker in started
    )


def once_per_test_run(tmp_path_factory, name, produce):
    """Runs ``produce(directory)`` once per test run, even with several xdist workers.

    Under pytest-xdist the tests of one file share a worker (tests/conftest.py's
    scheduler; ``--dist loadgroup`` cannot keep a group on one worker with
    pytest 9 and pytest-xdist 3.8: xdist renames ``item._nodeid``, which
    pytest 9 no longer reads); this lock keeps ``produce`` to one run under any
    other scheduling too. The first worker runs ``produce`` under a file lock in the
    directory the workers share and stores its JSON result; the others wait for
    the lock and read it.
    """
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # every worker's basetemp is a child of the run's
    result_path = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if result_path.exists():
                return json.loads(result_path.read_text())
            directory = shared / name
            directory.mkdir(exist_ok=True)
            result = produce(directory)
            result_path.write_text(json.dumps(result))
            return result
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
