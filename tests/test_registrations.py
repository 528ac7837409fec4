"""A fresh process that imports only the command line can load a run's model.

`keras.saving.load_model` finds custom classes only once the module defining them
has been imported, and the package's names load lazily; the command line
imported none of them before `translate` loaded a model (found by the slow CLI
tests after the run-directory owner moved the file names out of the trainer).
`keras_selfattn.models.saving.load_model` is the one loader; this checks that the
modules which load a model reach it, in the order the command line imports them.
"""

import subprocess
import sys

import pytest

LOADERS = {
    "keras_selfattn.translation": "_load_model",
    "keras_selfattn.training.fit.averaging": "_load",
}


@pytest.mark.parametrize("module", sorted(LOADERS))
def test_the_command_line_loads_a_saved_model_in_a_fresh_process(tmp_path, module):
    path = tmp_path / "m.keras"
    save = f"""
import keras, keras_selfattn.models as m
model = m.build_seq2seq(20, 20, m.ModelConfig(num_hiddens=8, num_heads=2,
    num_layers=1, ffn_hiddens=8, decoder_units=8, embedding_dim=8))
model.compile(optimizer=keras.optimizers.Adam(m.InverseSquareRootSchedule(1e-3, 10)),
              loss=m.MaskedCrossEntropy(), metrics=[m.MaskedAccuracy()])
model.save({str(path)!r})
"""
    load = f"""
import sys
import keras_selfattn.cli.commands  # what the command line has imported
from {module} import {LOADERS[module]} as load
print(type(load({str(path)!r})).__name__)
"""
    for script in (save, load):
        result = subprocess.run(
            [sys.executable, "-c", script],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["Seq2Seq"]
