"""The layer tests again, under KERAS_BACKEND=jax (the layers use keras.ops only)."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.jax
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_layer_tests_pass_under_jax():
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         str(REPO / "tests" / "layers")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
