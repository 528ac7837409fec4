"""The command line in a real process, without paying for its start-up.

A test whose question is what only a process shows (a signal and the exit
status it gives, a closed or full stream, a lock held by a process that dies)
needs a process, but not the 4-5 CPU-s that ``python -m keras_selfattn`` spends
importing TensorFlow and Keras before it does anything. `Popen` gives it one
forked from a server process that has imported them once (one server per test
process, started at its first use): the child is a process of its own, with the
test's pipes as its stdin, stdout and stderr, its own pid (signals go to it
straight), its environment and working directory, and it runs what ``python
ARGS`` would (``-m keras_selfattn ...``, a script, ``-c``) to the exit status
`Popen.wait` returns. The same serves the tests' other programs that import
TensorFlow (a training worker of a cluster, the mirrored checks).

The server only imports: it runs no TensorFlow op and starts no thread before it
forks, so a child starts as a fresh process would after its imports (Python
reseeds `random` in a child; ``TMPDIR`` is read again). What differs, and is
therefore left to `subprocess` (tests whose question it is):
start-up itself (what the import prints or costs, ``--help`` without Keras, the
import order), a backend other than TensorFlow (``KERAS_BACKEND`` is read at
Keras' import), ``--verbose`` (TensorFlow's C++ log level is fixed at 3 when it
is imported here, as the command line sets it for a quiet command), and the
console script or any other program.

Run as ``python -m tests.forked_commands SOCKET``: the server. It ends when its
stdin (a pipe from the test process) closes.
"""

import atexit
import io
import json
import os
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading

from tests.quiet_import import import_quietly

_STATUS = struct.Struct("!i")
_READY = b"ready\n"


class Popen(subprocess.Popen):
    """`subprocess.Popen` of ``[sys.executable, *args]``, forked from the test
    process's server instead of started afresh.

    ``args`` are Python's: ``["-m", "keras_selfattn", "train", ...]``,
    ``["-c", code, ...]`` or ``[script, ...]``, after an optional ``-u``. Takes
    `subprocess.Popen`'s stdin, stdout, stderr, cwd, env, text and
    start_new_session; ``closed``: the standard descriptors (0, 1, 2) the
    process starts without, as a shell's ``<&-`` or ``>&-`` starts it. The
    process's pid, signals, pipes, `wait`, `poll` and `communicate` are a real
    process's; ``returncode`` is what a started process's would be (negative:
    the signal that ended it).
    """

    forked = True  # the census counts these apart from fresh interpreters

    def __init__(self, args, *, closed=(), **kwargs):
        for name in ("pass_fds", "preexec_fn", "executable", "shell"):
            if kwargs.get(name):
                raise ValueError(f"a forked process takes no {name}")
        args = [os.fsdecode(arg) for arg in args]
        _python_program(args)  # a clear error now, not in the child
        self._status_socket = None
        self._closed = sorted(set(closed))
        super().__init__([sys.executable, *args], **kwargs)

    def _execute_child(
        self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
        startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
        errread, errwrite, restore_signals, gid, gids, uid, umask,
        start_new_session, process_group,
    ):  # fmt: skip
        streams = [
            p2cread if p2cread != -1 else 0,
            c2pwrite if c2pwrite != -1 else 1,
            errwrite if errwrite != -1 else 2,
        ]
        request = {
            "args": list(args[1:]),
            "cwd": os.fsdecode(cwd) if cwd is not None else os.getcwd(),
            "env": {
                os.fsdecode(name): os.fsdecode(value)
                for name, value in (os.environ if env is None else env).items()
            },
            "new_session": bool(start_new_session),
            "closed": self._closed,
        }
        try:
            self._status_socket = _server().fork(request, streams)
            self.pid = _read_int(self._status_socket)
            self._child_created = True
        finally:
            self._close_pipe_fds(
                p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite
            )

    def _try_wait(self, wait_flags):
        """(pid, wait status) once the server has reaped the child; (0, 0) while
        it runs and ``wait_flags`` asks not to block."""
        if wait_flags & os.WNOHANG:
            ready, _, _ = select.select([self._status_socket], [], [], 0)
            if not ready:
                return 0, 0
        status = _read_int(self._status_socket)
        self._status_socket.close()
        return self.pid, status

    def _internal_poll(self, _deadstate=None, **_):
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None and self._status_socket is not None:
                    pid, status = self._try_wait(os.WNOHANG)
                    if pid:
                        self._handle_exitstatus(status)
            except OSError:
                if _deadstate is not None:
                    self.returncode = _deadstate
            finally:
                self._waitpid_lock.release()
        return self.returncode


def command(argv, **kwargs):
    """`Popen` of ``python -m keras_selfattn ARGV``."""
    return Popen(["-m", "keras_selfattn", *argv], **kwargs)


def run(args, *, input=None, timeout=None, check=False, capture_output=False, **kwargs):
    """`subprocess.run` of ``[sys.executable, *args]``, forked (`Popen`)."""
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with Popen(args, **kwargs) as process:
        try:
            out, err = process.communicate(input, timeout=timeout)
        except BaseException:
            process.kill()
            process.wait()
            raise
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    if check:
        done.check_returncode()
    return done


class _Client:
    """The test process's side: the server started, and one connection per child."""

    def __init__(self):
        self._folder = tempfile.mkdtemp(prefix="ksa-fork-")
        self.path = os.path.join(self._folder, "server")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.forked_commands", self.path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        if self.process.stdout.readline() != _READY:
            self.process.kill()
            raise RuntimeError("the forking server did not start (its stderr above)")
        atexit.register(self.close)

    def fork(self, request, streams):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(self.path)
            message = json.dumps(request).encode()
            socket.send_fds(connection, [_STATUS.pack(len(message))], streams)
            connection.sendall(message)
        except BaseException:
            connection.close()
            raise
        return connection

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()
        self.process.stdout.close()
        for name in os.listdir(self._folder):
            os.unlink(os.path.join(self._folder, name))
        os.rmdir(self._folder)


_client = None
_client_lock = threading.Lock()


def _server():
    global _client
    with _client_lock:
        if _client is None or _client.process.poll() is not None:
            _client = _Client()
        return _client


def _read_int(connection):
    data = b""
    while len(data) < _STATUS.size:
        part = connection.recv(_STATUS.size - len(data))
        if not part:
            raise ConnectionError("the forking server closed the connection")
        data += part
    return _STATUS.unpack(data)[0]


# The server.


def _serve(path):
    """Imports the command line, then forks a child per request until stdin
    closes. Returns in each child only, with its request; never in the server."""
    os.environ["KERAS_BACKEND"] = "tensorflow"
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    # Keras, TensorFlow, the classes registered, the command line and its jobs;
    # TensorFlow's import lines kept off the server's stderr, as the command
    # line keeps them off its own.
    import_quietly("keras_selfattn", "keras_selfattn.cli", "keras_selfattn.jobs")

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children = {}  # pid -> the connection its status goes to
    sys.stdout.buffer.write(_READY)
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([listener, woken, 0], [], [])
        if woken in readable:  # SIGCHLD's wake-up bytes (more: select again)
            os.read(woken, 4096)
        _report_the_ended(children)
        if 0 in readable and not os.read(0, 512):
            return None  # the test process went away
        if listener in readable:
            connection, _ = listener.accept()
            request, streams = _receive(connection)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.set_wakeup_fd(-1)
                for held in (listener, connection, *children.values()):
                    held.close()
                for fd in (woken, wake):
                    os.close(fd)
                return _become(request, streams)
            for fd in streams:
                os.close(fd)
            children[pid] = connection
            connection.sendall(_STATUS.pack(pid))


def _report_the_ended(children):
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        if connection is not None:
            try:
                connection.sendall(_STATUS.pack(status))
            except OSError:  # the test let go of the process
                pass
            connection.close()


def _receive(connection):
    header, streams, _, _ = socket.recv_fds(connection, _STATUS.size, 3)
    size = _STATUS.unpack(header)[0]
    message = b""
    while len(message) < size:
        message += connection.recv(size - len(message))
    return json.loads(message), streams


def _become(request, streams):
    """The child: the request's streams, directory and environment."""
    if request["new_session"]:
        os.setsid()
    for number, fd in enumerate(streams):
        os.dup2(fd, number)
    for fd in set(streams) - {0, 1, 2}:
        os.close(fd)
    for number in request["closed"]:
        os.close(number)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # TMPDIR read again, as a started process reads it
    # The stop signals at their defaults, as a shell on a terminal starts a
    # command: a test run started by ``nohup`` or as a background job has SIGINT
    # or SIGHUP ignored, and the command keeps a signal its caller ignores
    # ignored (`keras_selfattn.stopping`), so the signals the tests send would
    # do nothing.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        default = signal.default_int_handler if signum == signal.SIGINT else None
        signal.signal(signum, default or signal.SIG_DFL)
    # What Python's start-up makes of the environment and of its fds.
    if os.environ.get("PYTHONFAULTHANDLER"):
        import faulthandler

        faulthandler.enable()
    for number, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if number in request["closed"]:
            setattr(sys, name, None)
        elif name != "stdin" and (
            request["args"][0] == "-u" or os.environ.get("PYTHONUNBUFFERED")
        ):
            stream = getattr(sys, name)
            setattr(sys, name, io.TextIOWrapper(
                io.FileIO(number, "w", closefd=False),
                encoding=stream.encoding,
                errors=stream.errors,
                write_through=True,
            ))  # fmt: skip
    return request["args"]


def _python_program(args):
    """(kind, what, argv) of Python's ``args``: kind "-m", "-c" or "script"."""
    rest = args[1:] if args[:1] == ["-u"] else args
    if rest[:1] in (["-m"], ["-c"]) and len(rest) > 1:
        return rest[0], rest[1], rest[2:]
    if rest and not rest[0].startswith("-"):
        return "script", rest[0], rest[1:]
    raise ValueError(
        "a forked process runs -m MODULE, -c CODE or a script (after an "
        f"optional -u); received: {args!r}"
    )


def _run_as_python_would(args):
    """Runs ``python ARGS`` here, as the interpreter's start-up would."""
    kind, what, argv = _python_program(args)
    if kind == "-m":
        sys.argv, sys.path[0] = [what, *argv], os.getcwd()
        runpy.run_module(what, run_name="__main__", alter_sys=True)
    elif kind == "-c":
        sys.argv, sys.path[0] = ["-c", *argv], ""
        # As ``python -c CODE`` runs it: the test's own code, in a test process.
        exec(compile(what, "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
    else:
        sys.argv = [what, *argv]
        sys.path[0] = os.path.dirname(os.path.abspath(what))
        runpy.run_path(what, run_name="__main__")


def _main():
    args = _serve(sys.argv[1])
    if args is not None:
        _run_as_python_would(args)


if __name__ == "__main__":
    _main()
