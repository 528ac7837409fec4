"""Which Keras backend runs, and one clear error when its package is missing.

Keras picks its backend once, when ``keras`` is first imported: ``KERAS_BACKEND``,
else the ``"backend"`` of ``$KERAS_HOME/keras.json`` (``~/.keras/keras.json``),
else TensorFlow. What runs where:

- the layers, the model, ``fit``: every backend whose package is installed
  (tested on TensorFlow and JAX);
- greedy and beam search (`keras_selfattn.decoding`), `Translator` and
  ``evaluate``: TensorFlow and JAX (the tokenizers are TensorFlow code on every
  backend, so TensorFlow is needed beside JAX);
- the command line, training with ``tf.data`` and ``tf.distribute``, export and
  serving: TensorFlow. The command line chooses it before Keras loads
  (`choose_tensorflow`: ``KERAS_BACKEND=tensorflow``), and says so in one line
  when the user's configuration named another backend, installed or not.

When the chosen backend's package is not installed (``KERAS_BACKEND=torch``
without torch), Keras fails deep inside its own import with a long traceback;
`check_backend`, run by the package's ``__init__`` before it imports Keras,
turns that into one `MissingBackendError` naming the package and how to
install it.

Neither Keras nor TensorFlow is imported here (the package's ``__init__`` uses
this module before Keras loads).
"""

import contextlib
import importlib
import importlib.util
import itertools
import json
import os
import re
import sys
import tempfile

__all__ = [
    "BACKEND_PACKAGES",
    "NATIVE_LOG_LINE",
    "WHAT_RUNS_WHERE",
    "MissingBackendError",
    "check_backend",
    "choose_command_line_backend",
    "choose_tensorflow",
    "configured_backend",
    "import_keras",
    "native_stderr_filtered",
]

# What runs on which backend (docs/layers.md's table, tests/test_backends.py reads it).
WHAT_RUNS_WHERE = {
    "the layers, the model, `fit`": ("TensorFlow", "JAX"),
    "greedy and beam search, `Translator`, `evaluate`": ("TensorFlow", "JAX"),
    "the command line, training runs, export, serving": ("TensorFlow",),
}

# Keras backend -> (the package it imports, how to install it).
BACKEND_PACKAGES = {
    "tensorflow": ("tensorflow", "pip install tensorflow"),
    "jax": ("jax", 'pip install "jax[cpu]" (or jax[cuda12] for a GPU)'),
    "torch": ("torch", "pip install torch"),
    "openvino": ("openvino", "pip install openvino"),
    "numpy": ("numpy", "pip install numpy"),
}


class MissingBackendError(ImportError):
    """The Keras backend asked for is not installed.

    Attributes:
        backend: the backend's name (``"torch"``).
        package: the package that is missing.
        reason: where the backend was asked for (``"KERAS_BACKEND=torch is set"``).
    """

    def __init__(self, backend, reason):
        self.backend = backend
        package, install = BACKEND_PACKAGES[backend]
        self.package = package
        self.reason = reason
        super().__init__(
            f"the Keras backend {backend!r} needs the {package} package, which is "
            f"not installed ({reason}): {install}, or choose an installed backend "
            "with KERAS_BACKEND=tensorflow or KERAS_BACKEND=jax",
            name=package,
        )


def _keras_config_file():
    """The ``keras.json`` Keras reads (its own rule: KERAS_HOME, else ~/.keras or
    /tmp/.keras when the home is not writable)."""
    if "KERAS_HOME" in os.environ:
        home = os.environ["KERAS_HOME"]
    else:
        base = os.path.expanduser("~")
        home = os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
    return os.path.join(os.path.expanduser(home), "keras.json")


def configured_backend():
    """The backend Keras will load, and why: ``(name, reason)``.

    ``reason`` is ``"KERAS_BACKEND=jax is set"``, ``"keras.json sets it"`` (with
    the file's path) or ``"the default"``. When Keras is imported already, its
    backend (``"Keras is already loaded"``).
    """
    if "keras" in sys.modules and hasattr(sys.modules["keras"], "config"):
        return sys.modules["keras"].config.backend(), "Keras is already loaded"
    if os.environ.get("KERAS_BACKEND"):
        name = os.environ["KERAS_BACKEND"]
        return name, f"KERAS_BACKEND={name} is set"
    path = _keras_config_file()
    try:
        with open(path) as f:
            name = json.load(f).get("backend")
    except (OSError, ValueError, AttributeError):
        name = None
    if isinstance(name, str) and name:
        return name, f'{path} sets "backend": "{name}"'
    return "tensorflow", "the default"


def check_backend(backend=None, reason=None):
    """Raises `MissingBackendError` when ``backend``'s package is not installed.

    Args:
        backend: a Keras backend name; None: `configured_backend`'s.
        reason: where it was asked for (in the message); None: `configured_backend`'s.

    A name Keras does not know is left to Keras to refuse.
    """
    if backend is None:
        backend, reason = configured_backend()
    if backend in BACKEND_PACKAGES:
        package = BACKEND_PACKAGES[backend][0]
        if importlib.util.find_spec(package) is None:
            raise MissingBackendError(backend, reason or f"backend {backend!r}")


def choose_tensorflow():
    """Makes Keras load on TensorFlow (``KERAS_BACKEND=tensorflow``), for the
    command line, before Keras loads.

    Returns:
        None, or the one line to print when the user's configuration named
        another backend (installed or not: ``KERAS_BACKEND=torch`` without torch
        runs on TensorFlow all the same).

    Raises:
        MissingBackendError: TensorFlow is not installed.
    """
    wanted, reason = configured_backend()
    check_backend("tensorflow", "the command line runs on TensorFlow")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    if wanted == "tensorflow":
        return None
    return (
        f"keras-selfattn: the command line runs on TensorFlow, not {wanted!r} "
        f"({reason}): using TensorFlow"
    )


def choose_command_line_backend():
    """In a ``keras-selfattn`` process whose Keras is not loaded yet, TensorFlow
    (`choose_tensorflow`, its line on stderr); elsewhere nothing.

    The package's ``__init__`` calls it before it checks the backend and imports
    Keras, for ``python -m keras_selfattn``, which imports the package before its
    command line runs; the console script chooses before it imports the package.
    """
    if "keras" in sys.modules or not _command_line():
        return
    note = choose_tensorflow()
    if note:
        print(note, file=sys.stderr, flush=True)


# TensorFlow's native log lines: absl's ("I0000 00:00:1796071465.895658 10740
# cudart_stub.cc:31] ..."), its pre-initialization notice, and TF's older format.
NATIVE_LOG_LINE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] )"
)


@contextlib.contextmanager
def native_stderr_filtered():
    """Drops TensorFlow's native log lines written to fd 2 inside the block; keeps
    the rest.

    TensorFlow prints "Could not find cuda drivers" through absl before any
    log level applies, so ``TF_CPP_MIN_LOG_LEVEL`` alone cannot hide it.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", "replace")
            for line in text.splitlines(keepends=True):
                if not NATIVE_LOG_LINE.match(line):
                    sys.stderr.write(line)
            sys.stderr.flush()


# How the command line starts: the console script, or ``python -m`` of these.
_COMMAND_LINE_MODULES = (
    "keras_selfattn",
    "keras_selfattn.cli",
    "keras_selfattn_command",
)


def _command_line():
    """True in a ``keras-selfattn`` process (the console script or ``python -m``)."""
    if os.path.basename(sys.argv[0]) == "keras-selfattn":
        return True
    argv = getattr(sys, "orig_argv", [])
    return any(
        flag == "-m" and module in _COMMAND_LINE_MODULES
        for flag, module in itertools.pairwise(argv)
    )


def _quiet_command_line():
    """True in a ``keras-selfattn`` process without ``--verbose`` or ``--debug``."""
    if "--verbose" in sys.argv or "--debug" in sys.argv:
        return False
    return _command_line()


@contextlib.contextmanager
def _matplotlib_hidden():
    """Keras' own import loads ``matplotlib.pyplot`` when it is installed (for
    ``keras.visualization``, which the command line never calls): start-up time
    and, with a read-only HOME, matplotlib's cache warnings in commands that draw
    nothing. Inside the block ``import matplotlib`` fails, so Keras goes without;
    after it `keras_selfattn.plotting` imports matplotlib where a figure is drawn."""
    if "matplotlib" in sys.modules:
        yield
        return
    sys.modules["matplotlib"] = None  # Python's documented way to refuse an import
    try:
        yield
    finally:
        if "matplotlib" in sys.modules and sys.modules["matplotlib"] is None:
            del sys.modules["matplotlib"]


def import_keras():
    """Imports Keras (and with it the backend's package), once.

    In the command line, Keras loads without matplotlib (`_matplotlib_hidden`), and
    (not ``--verbose``) TensorFlow's native import lines are dropped from stderr and
    its log level set to 3, as `keras_selfattn.cli.quiet` does for what TensorFlow
    logs later; elsewhere Keras loads as it would.
    """
    if "keras" in sys.modules or not _command_line():
        importlib.import_module("keras")
        return
    with contextlib.ExitStack() as stack:
        stack.enter_context(_matplotlib_hidden())
        if _quiet_command_line():
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
            stack.enter_context(native_stderr_filtered())
        importlib.import_module("keras")
