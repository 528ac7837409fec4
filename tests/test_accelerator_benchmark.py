"""benchmarks/attention_on_accelerators.py: runs under JAX, refuses TensorFlow by name.

The script times the layer on the JAX and torch backends (a GPU where there is
one); the JAX case runs in the one JAX process of tests/test_jax_backend.py.
Figures are not checked (noise at these sizes): only that the script runs end
to end and prints its table, the kernel it found and the two paths' agreement.
"""

import keras
import pytest

from tests.test_benchmarks import _load


@pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="the accelerator benchmark under JAX (tests/test_jax_backend.py)",
)
def test_runs_on_jax_in_quick_mode(capsys):
    _load("attention_on_accelerators").main(["--quick", "--dtypes", "float32"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| (2, 16, 32)")]
    assert len(rows) == 2, out  # no mask, padding mask
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[3] in ("XLA", "cuDNN fused"), row  # the kernel ours ran
        assert float(cells[-1]) < 1e-5, row  # fused op == three steps, float32
    assert "command: KERAS_BACKEND=jax .venv/bin/python" in out, out


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the TensorFlow backend's refusal"
)
def test_refuses_the_tensorflow_backend_by_name(capsys):
    with pytest.raises(SystemExit) as stop:
        _load("attention_on_accelerators").main(["--quick"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "KERAS_BACKEND=jax|torch" in err and "tensorflow backend" in err, err
    assert "attention_vs_keras.py" in err, err
