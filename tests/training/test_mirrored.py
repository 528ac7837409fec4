"""MirroredStrategy over two logical CPUs: same weights as one replica; XLA; float16.

The checks run in a fresh process (mirrored_checks.py): the CPU must be split
before TensorFlow initializes its devices.
"""

import json
import subprocess

import pytest

from tests import forked_commands
from tests.training.cluster import REPO, once_per_test_run, subprocess_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def measured(tmp_path_factory):
    return once_per_test_run(tmp_path_factory, "mirrored_checks", run_checks)


def run_checks(directory):
    out = directory / "results.json"
    script = REPO / "tests" / "training" / "mirrored_checks.py"
    process = forked_commands.Popen(
        [str(script), str(out)],
        cwd=REPO,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(
            f"mirrored_checks.py timed out:\n{output.decode(errors='replace')[-4000:]}"
        )
    assert process.returncode == 0, output.decode(errors="replace")[-4000:]
    return json.loads(out.read_text())


def test_two_replicas_reach_the_weights_of_one(measured):
    """Same global batch (32 = 2 x 16), same seed, dropout 0.

    The all-reduce is exact up to float rounding.
    """
    assert measured["replicas"] == [1, 2]
    float32 = measured["float32"]
    assert float32["update"] > 1e-2  # the steps moved the weights...
    assert float32["weight_difference"] < 1e-5  # ...and both runs moved them alike
    assert float32["losses_two"] == pytest.approx(float32["losses_one"], rel=1e-5)


def test_xla_on_two_replicas_compiles_each_replica(measured):
    jit = measured["jit"]
    # train's choice with jit_compile=True and two replicas: not Keras' whole-step
    # XLA...
    assert jit["per_replica_xla"] and not jit["keras_whole_step_jit"]
    # ...but each replica's step, which trains like one replica under Keras' XLA.
    assert jit["small_keras_jit_one"] and jit["small_per_replica_xla_two"]
    assert jit["small_difference"] < 1e-5
    assert jit["small_losses_two"] == pytest.approx(jit["small_losses_one"], rel=1e-5)


@pytest.mark.parametrize(
    ("policy", "scaled", "dtype"),
    [("mixed_float16", True, "float16"), ("mixed_bfloat16", False, "bfloat16")],
)
def test_mixed_precision_on_two_replicas(measured, policy, scaled, dtype):
    result = measured[policy]
    assert result["loss_scaled"] is scaled
    assert result["optimizer"] == ("SyncedLossScaleOptimizer" if scaled else "Adam")
    assert result["compute_dtype"] == dtype and result["logits_dtype"] == "float32"
    assert result["finite"]
    # Close to float32, not equal: the forward pass runs in 16 bits. (Weights are
    # not compared: Adam moves a weight by about the learning rate whatever the
    # gradient's size, so a tiny gradient that changes sign moves it the other way.)
    assert result["losses"] == pytest.approx(
        measured["float32"]["losses_one"], rel=2e-3
    )


def test_loss_scaling_skips_a_step_that_overflowed_on_any_replica(measured):
    """Replica 1 overflows, replica 0 does not.

    Stock Keras applies inf; ours skips the step and halves the scale.
    """
    assert (
        measured["loss_scale_stock"]["finite_weights"] is False
    )  # the bug the subclass fixes
    synced = measured["loss_scale_synced"]
    assert synced["finite_weights"] and synced["weights"] == [1.0, 1.0, 1.0]
    assert synced["scale"] == measured["loss_scale_stock"]["scale"] / 2
