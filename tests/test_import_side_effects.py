"""Importing the package starts no TensorFlow runtime.

A multi-worker strategy configures its collectives when it is created, and
TensorFlow refuses ("Collective ops must be configured at program startup") once
any op has run: a tensor made at import time (a module constant) breaks every
multi-worker run. Checked in a fresh process with a public API that refuses to
change once the runtime has started.
"""

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = """
import pkgutil, importlib, keras_selfattn
for module in pkgutil.walk_packages(keras_selfattn.__path__, "keras_selfattn."):
    if module.name != "keras_selfattn.__main__":
        importlib.import_module(module.name)
import tensorflow as tf
tf.config.threading.set_inter_op_parallelism_threads(1)  # raises once started
print("not started")
"""


@pytest.mark.slow
def test_importing_every_module_starts_no_tensorflow_runtime():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("not started")
