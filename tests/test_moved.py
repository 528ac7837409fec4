"""The old import paths of moved modules and names still work, with a warning."""

import importlib
import sys
import warnings

import pytest

from keras_selfattn import _moved


@pytest.mark.parametrize("old", sorted(_moved.MOVED_MODULES))
def test_an_old_module_path_warns_and_forwards(old):
    new = importlib.import_module(_moved.MOVED_MODULES[old])
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module(old)
    assert any(
        issubclass(w.category, DeprecationWarning) and new.__name__ in str(w.message)
        for w in caught
    )
    public = [name for name in dir(new) if not name.startswith("_")]
    assert public
    for name in public:
        assert getattr(alias, name) is getattr(new, name)


@pytest.mark.parametrize("key", sorted(_moved.MOVED_NAMES))
def test_a_moved_name_warns_and_is_the_new_one(key):
    module_name, name = key
    module = importlib.import_module(module_name)
    new = importlib.import_module(_moved.MOVED_NAMES[key])
    with pytest.warns(DeprecationWarning, match=new.__name__):
        value = getattr(module, name)
    assert value is getattr(new, _moved._RENAMED.get(key, name))


def test_an_unknown_name_is_still_an_attribute_error():
    from keras_selfattn.training import config

    with pytest.raises(AttributeError, match="no_such_name"):
        config.no_such_name  # noqa: B018


def test_no_module_of_the_package_uses_an_old_path():
    """Only the command line may still (until its split lands) use old paths."""
    from tests.test_import_graph import import_graph

    users = {
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in targets
        if target in _moved.MOVED_MODULES and module != "keras_selfattn.cli"
    }
    assert users == set()
