"""The ``>>>`` examples in keras_selfattn.serving docstrings run and give what they
show."""

import doctest
import importlib

import pytest

# One xdist worker runs every serving test, so the session fixtures train once.

# Modules whose docstrings hold examples (each must run at least one).
MODULES_WITH_EXAMPLES = [
    "keras_selfattn.serving.instructions",
    "keras_selfattn.serving.op_tables",
    "keras_selfattn.serving.publishing",
    "keras_selfattn.serving.warmup",
]
# The others are checked too: an example added there runs here.
OTHER_MODULES = [
    "keras_selfattn.serving.audit",
    "keras_selfattn.serving.check",
    "keras_selfattn.serving.export",
    "keras_selfattn.serving.saved_model_graph",
    "keras_selfattn.serving.signatures",
]


@pytest.mark.parametrize("name", MODULES_WITH_EXAMPLES + OTHER_MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, globs=dict(vars(module)), optionflags=doctest.ELLIPSIS
    )
    assert result.failed == 0
    if name in MODULES_WITH_EXAMPLES:
        assert result.attempted > 0
