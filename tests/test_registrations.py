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
import types

import keras
import pytest

from keras_selfattn.inference import ModelFileError, _load_model
from keras_selfattn.models import saving

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
# `import keras_selfattn` alone: Keras is loaded and knows the classes (said
# before the order's `import keras`).
ALONE = (
    "print('alone:', 'keras' in sys.modules, all("
    "sys.modules['keras'].saving.get_registered_object(n) for n in "
    "['keras_selfattn>PositionalEncoding', 'keras_selfattn>Seq2Seq']))\n"
)
ORDERS = {
    "keras_selfattn, keras": (
        "import sys\nimport keras_selfattn\n" + ALONE + "import keras"
    ),
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


# The orders in a chain of fresh processes: each imports in its order, loads the
# model the one before saved (it prints the loaded model's class), then saves one
# for the next; the first order comes again at the end to load the last save. So
# each order saves in one fresh process and loads, in another, a model a third
# saved: five processes instead of a pair per order.
CHAIN = sorted(ORDERS) + sorted(ORDERS)[:1]
# The loaded model's class, and its optimizer's learning-rate schedule (a
# compiled model: the schedule is deserialized by load_model too).
LOAD = (
    "loaded = keras.models.load_model({path!r})\n"
    "print('model:', type(loaded).__name__)\n"
    "print('schedule:', "
    "loaded.optimizer.get_config()['learning_rate']['class_name'])\n"
)
# Layers in the user's own model, saved by the chain's first process and loaded
# by its last (the same order, `import keras` then `import keras_selfattn`).
LAYERS_SAVE = """
x = keras.Input((None, 8))
y = ksa.layers.PositionalEncoding(num_hiddens=8, dropout=0.0)(x)
y = ksa.models.TransformerEncoderBlock(8, 2, 16, 0.0)(y)
keras.Model(x, y).save({path!r})
model = keras.Model(x, y)
model.compile(loss=ksa.models.masked_loss(), metrics=[ksa.models.MaskedAccuracy()])
model.save({compiled!r})
"""
LAYERS_LOAD = """
model = keras.saving.load_model({path!r})
compiled = keras.saving.load_model({compiled!r})
print(type(compiled.loss).__name__)
print(sorted({{type(layer).__module__.split('.')[0] for layer in model.layers}}))
"""


# The command line's loaders: each loads, in one of the chain's last two
# processes (after that order's own load_model), the model the process before
# saved, with what the command line imports imported first.
LOADERS = {
    "keras_selfattn.inference": "_load_model",
    "keras_selfattn.training.checkpoint_averaging": "_load",
}
COMMAND_LOAD = """
import keras_selfattn.cli.commands  # what the command line has imported
from {module} import {loader} as command_load
print('command:', type(command_load({path!r})).__name__)
"""
LOADER_AT = dict(zip((len(CHAIN) - 2, len(CHAIN) - 1), sorted(LOADERS)))


def _printed(lines, key):
    """The values of the lines ``key: value`` a chain process printed."""
    return [line.split(": ", 1)[1] for line in lines if line.startswith(f"{key}: ")]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """What each order's loading process printed (``loaded``: the model's class;
    ``schedules``: its optimizer's learning-rate schedule; ``alone``: what
    `import keras_selfattn` alone had loaded and registered), what each command
    line loader loaded (``by_command``) and what the last process printed of the
    layer models the first saved (``layers_loaded``)."""
    directory = tmp_path_factory.mktemp("orders")
    layers = {
        "path": str(directory / "pe.keras"),
        "compiled": str(directory / "compiled.keras"),
    }
    loaded, schedules, alone, by_command = {}, {}, [], {}
    previous, layers_loaded = None, None
    for step, order in enumerate(CHAIN):
        path = str(directory / f"m{step}.keras")
        script = ORDERS[order] + "\n"
        if step == len(CHAIN) - 1:  # first, as a process that loads only these
            script += LAYERS_LOAD.format(**layers)
        if previous is not None:
            script += LOAD.format(path=previous)
        if step in LOADER_AT:
            module = LOADER_AT[step]
            script += COMMAND_LOAD.format(
                module=module, loader=LOADERS[module], path=previous
            )
        if step < len(CHAIN) - 1:
            script += SAVE.format(path=path).replace(
                "import keras, keras_selfattn as ksa", "import keras_selfattn as ksa"
            )
        if step == 0:
            script += LAYERS_SAVE.format(**layers)
        result = _python(script)
        assert result.returncode == 0, (order, result.stderr[-3000:])
        lines = result.stdout.splitlines()
        if previous is not None:
            loaded[order] = _printed(lines, "model")
            schedules[order] = _printed(lines, "schedule")
            alone.extend(_printed(lines, "alone"))
        if step in LOADER_AT:
            by_command[LOADER_AT[step]] = _printed(lines, "command")
        if step == len(CHAIN) - 1:
            layers_loaded = "\n".join(
                x
                for x in lines
                if not x.startswith(("model: ", "schedule: ", "alone: ", "command: "))
            )
        previous = path
    return types.SimpleNamespace(
        loaded=loaded,
        schedules=schedules,
        alone=alone,
        by_command=by_command,
        layers_loaded=layers_loaded,
    )


@pytest.mark.slow
@pytest.mark.parametrize("order", sorted(ORDERS))
def test_a_saved_model_loads_under_each_import_order(chain, order):
    """Saved in one fresh process, loaded with `keras.models.load_model` in another:
    the model, and the learning-rate schedule of its compiled optimizer."""
    assert chain.loaded[order] == ["Seq2Seq"]
    assert chain.schedules[order] == ["InverseSquareRootSchedule"]


@pytest.mark.slow
def test_importing_the_package_imports_keras_and_registers_its_classes(chain):
    """``import keras_selfattn`` alone, in a fresh process: Keras is loaded and
    knows the classes."""
    assert CHAIN.count("keras_selfattn, keras") == 1
    assert chain.alone == ["True True"]


@pytest.mark.slow
def test_load_model_after_import_keras_selfattn_in_a_fresh_process(chain):
    """`import keras` then `import keras_selfattn` registers every class for
    load_model: the layers in a user's own model, a compiled one's loss too."""
    assert CHAIN[0] == CHAIN[-1] == "keras, keras_selfattn"
    out = chain.layers_loaded
    assert "keras_selfattn" in out and "MaskedCrossEntropy" in out


def _model_with_an_unknown_class(path):
    """A `.keras` file whose layer class was registered as mypkg>Unknown, then
    taken out of Keras' registry: as in a process where mypkg was not imported."""
    from keras.src.saving import object_registration

    @keras.saving.register_keras_serializable(package="mypkg")
    class Unknown(keras.layers.Layer):
        def call(self, x):
            return x

    try:
        x = keras.Input((3,))
        keras.Model(x, Unknown()(x)).save(path)
    finally:
        object_registration.GLOBAL_CUSTOM_OBJECTS.pop("mypkg>Unknown")
        object_registration.GLOBAL_CUSTOM_NAMES.pop(Unknown)
    assert keras.saving.get_registered_object("mypkg>Unknown") is None


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


@pytest.mark.slow  # the chain's fresh processes
@pytest.mark.parametrize("module", sorted(LOADERS))
def test_the_command_line_loads_a_saved_model_in_a_fresh_process(chain, module):
    """A model saved by a fresh process, loaded in another that imported what the
    command line imports, through the command's own loader."""
    assert sorted(LOADER_AT.values()) == sorted(LOADERS)
    assert chain.by_command[module] == ["Seq2Seq"]
