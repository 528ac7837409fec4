"""The public API is typed: every argument and return annotated, and ``py.typed``
shipped so that a user's type checker reads the hints (PEP 561).

mypy itself is a lint step, not a test: ``./run.sh lint`` runs it over the files of
pyproject.toml's [tool.mypy], tests/typing_cases.py among them (wrong calls that
the hints must refuse)."""

import ast
import inspect
import pathlib

import pytest

import keras_selfattn
from keras_selfattn import layers, scoring, translation
from keras_selfattn.config import model_config
from keras_selfattn.models import seq2seq
from keras_selfattn.serving import export
from keras_selfattn.training.fit import train

REPO = pathlib.Path(__file__).resolve().parents[1]

# The classes and functions a user calls; a class stands for its constructor
# and every public method it defines itself.
PUBLIC_API = (
    layers.PositionalEncoding,
    layers.LearnedPositionalEncoding,
    layers.MultiHeadSelfAttention,
    layers.BahdanauAttention,
    layers.BahdanauDecoderCell,
    layers.BahdanauDecoder,
    model_config.ModelConfig,
    seq2seq.build_seq2seq,
    translation.Translator,
    scoring.evaluate,
    scoring.format_metrics,
    export.export_run,
    export.export_translator,
    train.train,
    train.TrainResult,
)

# Methods Keras itself calls with arguments of its own (a shape, a config).
_KERAS_HOOKS = {"from_config"}


def _functions(obj):
    """``(qualified name, function)`` of ``obj``, or of a class' own methods."""
    if not inspect.isclass(obj):
        return [(obj.__qualname__, obj)]
    found = []
    for name, member in vars(obj).items():
        if isinstance(member, (classmethod, staticmethod)):
            member = member.__func__
        if isinstance(member, property):
            member = member.fget
        public = name == "__init__" or not name.startswith("_")
        if public and name not in _KERAS_HOOKS and inspect.isfunction(member):
            found.append((f"{obj.__qualname__}.{name}", member))
    return found


def _untyped(function):
    """The parameters (and ``return``) of ``function`` without an annotation."""
    missing = [
        name
        for name, parameter in inspect.signature(function).parameters.items()
        if name not in ("self", "cls")
        and parameter.annotation is inspect.Parameter.empty
    ]
    if "return" not in function.__annotations__:
        missing.append("return")
    return missing


@pytest.mark.parametrize("obj", PUBLIC_API, ids=lambda obj: obj.__qualname__)
def test_the_public_api_is_annotated(obj):
    functions = _functions(obj)
    assert functions, obj
    untyped = {name: _untyped(f) for name, f in functions if _untyped(f)}
    assert not untyped, f"not annotated: {untyped}"


def test_the_untyped_check_sees_a_missing_annotation():
    def half_typed(a: int, b) -> int:
        return a

    def no_return(a: int):
        return a

    assert _untyped(half_typed) == ["b"]
    assert _untyped(no_return) == ["return"]


def test_py_typed_ships_with_the_package():
    package = pathlib.Path(keras_selfattn.__file__).parent
    assert (package / "py.typed").is_file()
    tree = ast.parse((REPO / "setup.py").read_text())
    (package_data,) = [
        ast.literal_eval(keyword.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "package_data"
    ]
    assert "py.typed" in package_data["keras_selfattn"]
