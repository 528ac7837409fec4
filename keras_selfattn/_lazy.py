"""Packages whose names load on first use (PEP 562), so that importing one is cheap.

``import keras_selfattn`` and the command line's argument parsing must not import
Keras or TensorFlow (seconds of start-up): each package ``__init__`` lists its
public names and the module that defines each one, and `lazy_package` loads that
module when the name is first looked up.
"""

import importlib
import sys
import types


class _LazyPackage(types.ModuleType):
    """A package module in which a submodule never hides the public name it shares.

    ``keras_selfattn.training.train`` is the function; loading the submodule
    ``training/fit/train.py`` (directly, by any importer) would otherwise replace
    the package attribute with the module.
    """

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and name in self.__dict__.get(
            "_lazy_exports", {}
        ):
            return
        super().__setattr__(name, value)


def lazy_package(package_name, exports, submodules=()):
    """Makes ``package_name`` load each public name on first use.

    Args:
        package_name: the package's ``__name__``.
        exports: ``{public name: the module that defines it}``.
        submodules: public names that are submodules of the package
            (``keras_selfattn.layers``), loaded on first use too.

    Returns:
        ``(__getattr__, __dir__)`` for the package's namespace.
    """
    package = sys.modules[package_name]
    package._lazy_exports = dict(exports)
    package.__class__ = _LazyPackage
    submodules = frozenset(submodules)

    def __getattr__(name):
        if name in submodules:
            return importlib.import_module(f"{package_name}.{name}")
        if name not in exports:
            raise AttributeError(f"module {package_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        package.__dict__[name] = value
        return value

    def __dir__():
        return sorted(set(package.__dict__) | set(exports) | submodules)

    return __getattr__, __dir__
