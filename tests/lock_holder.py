"""Holds the run-directory lock of ``argv[1]`` until stdin closes: another
process's `train` holding a run, for the tests of the lock.

Run as ``python tests/lock_holder.py RUN_DIR``. It loads `run_lock` (standard
library only) without running the package's ``__init__``, which imports Keras and
TensorFlow: the holder starts in a fraction of a second instead of paying
TensorFlow's import. It prints ``held`` once the lock is taken.
"""

import pathlib
import sys
import types

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_selfattn"
# The packages on the way to run_lock and to run_directory.layout (its import).
PACKAGES = (
    "keras_selfattn",
    "keras_selfattn.training",
    "keras_selfattn.training.resume",
    "keras_selfattn.run_directory",
)


def _bare_packages():
    """The packages as empty modules with their folders as paths: their submodules
    import, their ``__init__`` files do not run."""
    for name in PACKAGES:
        package = types.ModuleType(name)
        package.__path__ = [str(PACKAGE.parent.joinpath(*name.split(".")))]
        sys.modules[name] = package


def main(run_dir):
    _bare_packages()
    from keras_selfattn.training.resume.run_lock import RunLock

    sys.argv = ["keras-selfattn", "train", "--out", run_dir]  # what a train records
    lock = RunLock.acquire(run_dir)
    assert "tensorflow" not in sys.modules and "keras" not in sys.modules
    print("held", flush=True)
    sys.stdin.read()
    return lock


if __name__ == "__main__":
    main(sys.argv[1])
