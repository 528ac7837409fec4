"""The layer and decoding tests again, under KERAS_BACKEND=jax (keras.ops only).

The decoding files are the searches against their brute-force references
(tests/test_decoding.py) and the jitted searches' own tests
(tests/test_decoding_jax.py); they share the one JAX process of the layer tests.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
LAYER_TEST_FILES = sorted((REPO / "tests" / "layers").glob("test_*.py"))
DECODING_TEST_FILES = [
    REPO / "tests" / "test_decoding.py",
    REPO / "tests" / "test_decoding_jax.py",
]


@pytest.mark.slow
@pytest.mark.jax
@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed"
)
def test_layer_and_decoding_tests_pass_under_jax():
    """Every layer test file and the decoding tests, in one process (one start of JAX
    and TensorFlow, not one a file)."""
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
            *map(str, LAYER_TEST_FILES + DECODING_TEST_FILES),
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
    # The JAX-only tests ran: -ra (pyproject's addopts) would list them as skipped.
    assert "jitted searches" not in result.stdout
