"""The package's version, read without importing Keras.

``__version__`` is the source's own (setup.py reads it from this file);
`installed_version` is what ``keras-selfattn --version`` prints: the installed
distribution's version (`importlib.metadata`), else this constant when the
package runs from a source tree that is not installed. Standard library only,
so that the command line answers ``--version`` before Keras loads.
"""

__version__ = "0.1.0"
# The distribution's name (setup.py's ``name``), as importlib.metadata knows it.
DISTRIBUTION = "keras-selfattn"

__all__ = ["DISTRIBUTION", "__version__", "installed_version"]


def installed_version():
    """The installed ``keras-selfattn``'s version, else `__version__`."""
    import importlib.metadata  # a few milliseconds: only when asked

    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return __version__
