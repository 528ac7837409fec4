"""Old import paths of moved modules and names: still importable, with a warning.

The one table of what moved (issue 25 grouped ``keras_selfattn.training`` by idea
and gave the run directory's layout its own module). An old module path
(``import keras_selfattn.training.backup``) is answered by a meta path finder
with a thin module that warns once (`DeprecationWarning`) and forwards every
attribute to the new module; a name that left a module that still exists is
answered by that module's ``__getattr__`` (`moved_name`).

The new modules are named by strings and imported with `importlib`, so this
module imports nothing of the package (tests/test_import_graph.py: it sits at the
bottom of the house).
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

_TRAINING = "keras_selfattn.training"

# old module -> new module
MOVED_MODULES = {
    f"{_TRAINING}.{old}": f"{_TRAINING}.{new}"
    for old, new in {
        "presets": "config.presets",
        "train": "fit.train",
        "step_loop": "fit.step_loop",
        "watch": "fit.watch",
        "compiled_model": "fit.compiled_model",
        "averaging": "fit.averaging",
        "run_dir": "run.run_dir",
        "run_lock": "run.run_lock",
        "backup": "run.backup",
        "resume": "run.resume",
        "continuation": "run.continuation",
        "data_fingerprint": "run.data_fingerprint",
        "run_data": "data.run_data",
        "run_batches": "data.run_batches",
        "run_tokenizer": "data.run_tokenizer",
        "strategy": "distribute.strategy",
        "distributed": "distribute.distributed",
        "keras_fix": "distribute.keras_fix",
        "loss_scale": "distribute.loss_scale",
        "per_replica_xla": "distribute.per_replica_xla",
        "tpu_audit": "distribute.tpu_audit",
    }.items()
}

# (module that still exists, name that left it) -> the module that has it now
MOVED_NAMES = {
    (f"{_TRAINING}.config", "load_run_config"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.config", "save_run_config"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.fit.train", "write_metrics"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.fit.train", "load_pairs"): "keras_selfattn.text.dates",
    (f"{_TRAINING}.fit.train", "MODEL_FILE"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.fit.train", "CONFIG_FILE"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.fit.train", "HISTORY_FILE"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.fit.train", "METRICS_FILE"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.fit.train", "SPLITS_DIR"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.fit.train", "BACKUP_DIR"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.fit.averaging", "REPLACED_MODEL"): "keras_selfattn.run_layout",
    (f"{_TRAINING}.fit.step_loop", "ResumableInput"): f"{_TRAINING}.run.resume",
}
# A name that was renamed where it went: (module, old name) -> new name.
_RENAMED = {
    (f"{_TRAINING}.fit.averaging", "REPLACED_MODEL"): "REPLACED_MODEL_FILE",
}


def _warn(old, new):
    warnings.warn(
        f"{old} moved to {new}; the old name will be removed in a later release",
        DeprecationWarning,
        stacklevel=3,
    )


def moved_name(module_name, name):
    """The value of ``name`` that left ``module_name`` (for its ``__getattr__``).

    Raises:
        AttributeError: ``name`` is not a moved name of ``module_name``.
    """
    key = (module_name, name)
    if key not in MOVED_NAMES:
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
    new_name = _RENAMED.get(key, name)
    _warn(f"{module_name}.{name}", f"{MOVED_NAMES[key]}.{new_name}")
    return getattr(importlib.import_module(MOVED_NAMES[key]), new_name)


class _AliasLoader(importlib.abc.Loader):
    """Makes the old module a forwarder to the new one."""

    def __init__(self, new):
        self.new = new

    def create_module(self, spec):
        return None  # the default module

    def exec_module(self, module):
        _warn(module.__name__, self.new)
        target = importlib.import_module(self.new)
        module.__doc__ = f"Moved to {self.new} (deprecated alias)."
        module.__getattr__ = lambda name: getattr(target, name)
        module.__dir__ = lambda: dir(target)


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the old module paths of `MOVED_MODULES`."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(MOVED_MODULES[fullname])
        )


def install():
    """Puts the finder of the old module paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
