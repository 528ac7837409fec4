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
  serving: TensorFlow. The command line sets ``KERAS_BACKEND=tensorflow`` itself
  (`use_tensorflow_backend`) and says so in one line when the user asked for
  another backend.

When the chosen backend's package is not installed (``KERAS_BACKEND=torch``
without torch), Keras fails deep inside its own import with a long traceback;
`install_import_check` (run when ``keras_selfattn`` is imported) turns that into
one `MissingBackendError` naming the package and how to install it.

Neither Keras nor TensorFlow is imported here (the package's ``__init__`` and the
command line use this module before Keras loads).
"""

import importlib.abc
import importlib.util
import json
import os
import sys

__all__ = [
    "BACKEND_PACKAGES",
    "WHAT_RUNS_WHERE",
    "MissingBackendError",
    "WrongBackendError",
    "check_backend",
    "configured_backend",
    "install_import_check",
    "use_tensorflow_backend",
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


class WrongBackendError(RuntimeError):
    """Keras is already imported with another backend than the one needed."""


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


class _KerasImportCheck(importlib.abc.MetaPathFinder):
    """Checks the backend's package when ``keras`` is about to be imported; then
    steps aside (it finds nothing itself)."""

    def find_spec(self, name, path=None, target=None):
        if name == "keras":
            check_backend()  # raises while the backend is still missing
            _remove_import_check()


def _remove_import_check():
    sys.meta_path[:] = [
        f for f in sys.meta_path if not isinstance(f, _KerasImportCheck)
    ]


def install_import_check():
    """Makes ``import keras`` raise `MissingBackendError` while the backend Keras
    would load is not installed.

    Only when that is so now (a finder on ``sys.meta_path`` costs every later
    import a call): the usual case installs nothing. The check runs again at
    ``import keras``, so the command line, which sets ``KERAS_BACKEND`` after
    importing ``keras_selfattn``, goes through.
    """
    if "keras" in sys.modules:
        return
    try:
        check_backend()
    except MissingBackendError:
        if not any(isinstance(f, _KerasImportCheck) for f in sys.meta_path):
            sys.meta_path.insert(0, _KerasImportCheck())


def use_tensorflow_backend():
    """Sets ``KERAS_BACKEND=tensorflow`` for the command line, before Keras loads.

    Returns:
        None, or the one line to print when the user's configuration asked for
        another backend.

    Raises:
        MissingBackendError: TensorFlow is not installed.
        WrongBackendError: Keras is already loaded with another backend (the
            command line called from a Python process that imported it).
    """
    wanted, reason = configured_backend()
    if reason == "Keras is already loaded":
        if wanted != "tensorflow":
            raise WrongBackendError(
                f"the command line needs the TensorFlow backend, but Keras is "
                f"already loaded with {wanted!r} in this process"
            )
        return None
    os.environ["KERAS_BACKEND"] = "tensorflow"
    check_backend("tensorflow", "the command line needs TensorFlow")
    if wanted == "tensorflow":
        return None
    return (
        f"keras-selfattn: using the TensorFlow backend ({reason}; the command line "
        "needs TensorFlow)"
    )
