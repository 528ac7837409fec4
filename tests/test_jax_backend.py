"""The layer tests again, under KERAS_BACKEND=jax (the layers use keras.ops only)."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
LAYER_TEST_FILES = sorted((REPO / "tests" / "layers").glob("test_*.py"))


@pytest.mark.slow
@pytest.mark.jax
@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed"
)
def test_layer_tests_pass_under_jax():
    """Every layer test file, in one process (one start of JAX and TensorFlow, not one a
    file)."""
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        PYTHONPATH=str(REPO),
        TF_CPP_MIN_LOG_LEVEL="3",
        JAX_PLATFORMS="cpu",
        # XLA's CPU optimization passes change speed, not what the layers
        # compute: without them the run takes about 0.7x the time.
        XLA_FLAGS=(
            os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
        ).strip(),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            *map(str, LAYER_TEST_FILES),
        ],
        cwd=REPO,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
