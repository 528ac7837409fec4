"""The examples in keras_selfattn.text docstrings run and give what they show."""

import doctest
import importlib

import pytest
import tensorflow as tf

MODULES = [
    "keras_selfattn.text.buckets",
    "keras_selfattn.text.corpus",
    "keras_selfattn.text.dataset",
    "keras_selfattn.text.dates",
    "keras_selfattn.text.pair_tokenizer",
    "keras_selfattn.text.sentencepiece_model",
    "keras_selfattn.text.tokenizers",
    "keras_selfattn.text.tokenizers.base",
    "keras_selfattn.text.tokenizers.char_tokenizer",
    "keras_selfattn.text.tokenizers.config",
    "keras_selfattn.text.tokenizers.factory",
    "keras_selfattn.text.tokenizers.learning",
    "keras_selfattn.text.tokenizers.sentencepiece_tokenizer",
    "keras_selfattn.text.tokenizers.text_ops",
    "keras_selfattn.text.tokenizers.word_tokenizer",
    "keras_selfattn.text.tokenizers.wordpiece_tokenizer",
    "keras_selfattn.text.vocab",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    globs = dict(vars(module), tf=tf)
    result = doctest.testmod(module, globs=globs, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


@pytest.mark.parametrize("name", MODULES)
def test_public_functions_document_their_arguments(name):
    import inspect

    module = importlib.import_module(name)
    for public in module.__all__:
        obj = getattr(module, public)
        if not callable(obj) or isinstance(obj, type) and issubclass(obj, tuple):
            continue
        functions = [obj]
        if isinstance(obj, type):
            functions = [obj] + [
                member
                for attr, member in vars(obj).items()
                if not attr.startswith("_") and inspect.isfunction(member)
            ]
        for function in functions:
            doc = inspect.getdoc(function) or ""
            assert doc, f"{name}.{public}: {function.__name__} has no docstring"
            target = function.__init__ if isinstance(function, type) else function
            params = [
                p
                for p in inspect.signature(target).parameters
                if p not in ("self", "cls", "args", "kwargs")
            ]
            if "Args:" in doc:
                for param in params:
                    assert f"{param}:" in doc, f"{name}.{public}: {param} undocumented"
