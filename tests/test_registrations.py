"""A saved model loads in a fresh process whatever the import order.

`keras.saving.load_model` finds custom classes only once the module defining them
has been imported; ``import keras_selfattn`` registers them all, before or after
``import keras`` or ``import tensorflow``. A class nobody registered is one line
that names it and the import that fixes it.
"""

import os
import pathlib
import subprocess
import sys

import pytest

from keras_selfattn.models import saving
from keras_selfattn.translation import ModelFileError, _load_model

REPO = pathlib.Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    ),
    "TF_CPP_MIN_LOG_LEVEL": "3",
}
SAVE = """
import keras, keras_selfattn as ksa
m = ksa.models
model = ksa.build_seq2seq(20, 20, ksa.ModelConfig(num_hiddens=8, num_heads=2,
    num_layers=1, ffn_hiddens=8, decoder_units=8, embedding_dim=8))
model.compile(optimizer=keras.optimizers.Adam(m.InverseSquareRootSchedule(1e-3, 10)),
              loss=m.MaskedCrossEntropy(), metrics=[m.MaskedAccuracy()])
model.save({path!r})
"""
ORDERS = {
    "keras_selfattn, keras": "import keras_selfattn\nimport keras",
    "keras, keras_selfattn": "import keras\nimport keras_selfattn",
    "tensorflow, keras_selfattn, keras": (
        "import tensorflow\nimport keras_selfattn\nimport keras"
    ),
    "tensorflow, keras, keras_selfattn": (
        "import tensorflow\nimport keras\nimport keras_selfattn"
    ),
}


def _python(script):
    return subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )


@pytest.mark.slow
@pytest.mark.parametrize("order", sorted(ORDERS))
def test_a_saved_model_loads_under_each_import_order(tmp_path, order):
    """Saved in one fresh process, loaded with `keras.models.load_model` in another."""
    path = str(tmp_path / "m.keras")
    save = SAVE.format(path=path).replace(
        "import keras, keras_selfattn as ksa",
        ORDERS[order] + "\nimport keras_selfattn as ksa",
    )
    load = ORDERS[order] + f"\nprint(type(keras.models.load_model({path!r})).__name__)"
    for script in (save, load):
        result = _python(script)
        assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["Seq2Seq"]


def _model_with_an_unknown_class(path):
    """A `.keras` file whose layer class is registered as mypkg>Unknown in a
    process that is gone."""
    script = f"""
import keras
@keras.saving.register_keras_serializable(package="mypkg")
class Unknown(keras.layers.Layer):
    def call(self, x):
        return x
x = keras.Input((3,))
keras.Model(x, Unknown()(x)).save({str(path)!r})
"""
    result = _python(script)
    assert result.returncode == 0, result.stderr[-3000:]


def test_a_class_nobody_registered_is_one_line_naming_it(tmp_path):
    path = tmp_path / "model.keras"
    _model_with_an_unknown_class(path)
    with pytest.raises(saving.MissingClassError) as info:
        saving.load_model(path)
    assert str(info.value) == (
        f"{path} uses class Unknown (package mypkg), which is not registered in this "
        "process; import mypkg before loading it"
    )
    assert (info.value.class_name, info.value.package) == ("Unknown", "mypkg")
    with pytest.raises(ModelFileError) as info:  # as translate reports it
        _load_model(path)
    assert str(info.value).startswith(f"{path} uses class Unknown (package mypkg)")


def test_the_missing_class_is_read_from_keras_message():
    error = TypeError(
        "<class 'Functional'> could not be deserialized properly. ... Exception "
        "encountered: Could not locate class 'Seq2Seq'. Make sure ... Full object "
        "config: {'module': None, 'class_name': 'Seq2Seq', 'registered_name': "
        "'keras_selfattn>Seq2Seq'}"
    )
    missing = saving.missing_class_error("model.keras", error)
    assert str(missing) == (
        "model.keras uses class Seq2Seq (package keras_selfattn), which is not "
        "registered in this process; import keras_selfattn before loading it"
    )
    bare = saving.missing_class_error(
        "m.keras", TypeError("Could not locate class 'X'")
    )
    assert str(bare).endswith("import the module that defines it before loading it")
    assert saving.missing_class_error("m.keras", ValueError("other")) is None


LOADERS = {
    "keras_selfattn.translation": "_load_model",
    "keras_selfattn.training.fit.averaging": "_load",
}


@pytest.fixture(scope="module")
def saved_by_a_fresh_process(tmp_path_factory):
    """A model saved by a fresh process that imported `keras_selfattn.models` (one
    save for the loaders' tests: each loads it in a fresh process of its own)."""
    path = tmp_path_factory.mktemp("saved") / "m.keras"
    result = _python(SAVE.format(path=str(path)))
    assert result.returncode == 0, result.stderr[-3000:]
    return path


@pytest.mark.parametrize("module", sorted(LOADERS))
def test_the_command_line_loads_a_saved_model_in_a_fresh_process(
    saved_by_a_fresh_process, module
):
    path = saved_by_a_fresh_process
    load = f"""
import sys
import keras_selfattn.cli.commands  # what the command line has imported
from {module} import {LOADERS[module]} as load
print(type(load({str(path)!r})).__name__)
"""
    result = _python(load)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["Seq2Seq"]
