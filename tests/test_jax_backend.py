"""The layer and decoding tests again, under KERAS_BACKEND=jax (keras.ops only).

The decoding files are the searches against their brute-force references
(tests/test_decoding.py) and the jitted searches' own tests
(tests/test_decoding_jax.py); with the accelerator benchmark's smoke run
(tests/test_accelerator_benchmark.py) they share the one JAX process of the layer
tests.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from tests.training.cluster import once_per_test_run
from tests.xla_flags import FAST_COMPILE_FLAGS

REPO = pathlib.Path(__file__).resolve().parents[1]
LAYER_TEST_FILES = sorted((REPO / "tests" / "layers").glob("test_*.py"))
DECODING_TEST_FILES = [
    REPO / "tests" / "test_decoding.py",
    REPO / "tests" / "test_decoding_jax.py",
]
# The accelerator benchmark's smoke run (its figures are timed on a GPU).
BENCHMARK_TEST_FILES = [REPO / "tests" / "test_accelerator_benchmark.py"]


# Cases that repeat, on JAX, a property another case of the same test checks
# there; every case still runs under TensorFlow, and each test keeps a case here.
RERUN_ONCE_ON_JAX = (
    # top-k against a sort: kept, a size that fills its blocks (4096, k=1) and two
    # that need padding (600, k=4; 7919, k=8).
    *(
        f"tests/test_decoding.py::test_two_level_top_k_equals_a_sort_ties_included"
        f"[{k}-{size}]"
        for k, size in (
            (1, 600), (8, 600), (4, 4096), (8, 4096),
            (1, 7919), (4, 7919), (1, 8000), (8, 8000),
        )
    ),
    # Shift invariance: relative positions (clip 2) without the causal mask, and
    # rotary ones with it; a clip of 8 is the same code with another constant.
    *(
        "tests/layers/test_relative_attention.py::"
        f"test_shifting_every_position_leaves_the_output_unchanged[{case}]"
        for case in ("False-relative8", "True-relative8", "True-relative2",
                     "False-rotary")
    ),
    # Length ratios: greedy with attention is the static loop on TensorFlow, and
    # on JAX the jitted loop that greedy's and the beam's cases run there.
    *(
        f"tests/test_decoding.py::{test}[greedy with attention]"
        for test in (
            "test_a_length_ratio_ends_each_sentence_as_max_len_at_its_cap_would",
            "test_no_length_ratio_or_one_that_never_binds_gives_today_s_results",
        )
    ),
    # The unrolled decoder against the loop: a GRU at inference and two LSTM
    # layers in training.
    *(
        "tests/layers/test_bahdanau_decoder_unroll.py::"
        f"test_unrolled_equals_symbolic_loop[{case}]"
        for case in ("False-kwargs1", "True-kwargs0")
    ),
)  # fmt: skip


def fast_compile_flags(env, tmp_path_factory):
    """`FAST_COMPILE_FLAGS` where this jaxlib's XLA knows them all, else the first
    (XLA aborts at start on a flag it does not know, and newer ones drop flags).
    Probed in a process of its own once per test run (a start of JAX, seconds):
    the JAX tests of every xdist worker read the answer."""

    def probe(_directory):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import jax; jax.numpy.ones(2).sum().block_until_ready()",
            ],
            env={**env, "XLA_FLAGS": " ".join(FAST_COMPILE_FLAGS)},
            capture_output=True,
            check=False,
            timeout=300,
        )
        return list(
            FAST_COMPILE_FLAGS if done.returncode == 0 else FAST_COMPILE_FLAGS[:1]
        )

    return once_per_test_run(tmp_path_factory, "jax_fast_compile_flags", probe)


@pytest.mark.slow
@pytest.mark.jax
@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed"
)
def test_layer_and_decoding_tests_pass_under_jax(tmp_path_factory):
    """Every layer test file and the decoding tests, in one process (one start of JAX
    and TensorFlow, not one a file), less `RERUN_ONCE_ON_JAX`."""
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        PYTHONPATH=str(REPO),
        TF_CPP_MIN_LOG_LEVEL="3",
        JAX_PLATFORMS="cpu",
    )
    env["XLA_FLAGS"] = " ".join(
        [env.get("XLA_FLAGS", ""), *fast_compile_flags(env, tmp_path_factory)]
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
            *map(str, LAYER_TEST_FILES + DECODING_TEST_FILES + BENCHMARK_TEST_FILES),
            *(f"--deselect={node}" for node in RERUN_ONCE_ON_JAX),
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
    # Every case left out exists (a renamed one would run again unnoticed).
    assert f"{len(RERUN_ONCE_ON_JAX)} deselected" in result.stdout, result.stdout[-500:]
    # The JAX-only tests ran: -ra (pyproject's addopts) would list them as skipped.
    assert "jitted searches" not in result.stdout
    assert "the accelerator benchmark under JAX" not in result.stdout
    assert "the mask cuDNN takes through JAX" not in result.stdout
