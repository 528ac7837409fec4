"""The ``>>>`` examples in the layers' and models' docstrings run and give what they
show."""

import doctest
import importlib
import pkgutil

import pytest

import keras_selfattn.layers
import keras_selfattn.models


def _modules(package):
    return [
        f"{package.__name__}.{info.name}"
        for info in pkgutil.iter_modules(package.__path__)
    ]


MODULES = _modules(keras_selfattn.layers) + _modules(keras_selfattn.models)


def test_every_module_with_examples_is_listed():
    """New modules are picked up by the listing above, not by hand."""
    assert "keras_selfattn.layers.masking" in MODULES
    assert "keras_selfattn.models.seq2seq" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
