"""The fix that makes Keras 3 ``model.fit`` run under ``MultiWorkerMirroredStrategy``.

keras-team/keras#20585: stock Keras 3 fails twice under a multi-worker strategy,
in its symbolic build and in its reduction of the per-step logs.
`keras_multi_worker_fix` replaces the two private functions while ``fit`` runs,
only for the Keras versions known to need it (`KERAS_FIX_VERSIONS`).
"""

import contextlib
import functools
import os
import threading
import warnings

import keras
import tensorflow as tf
from packaging.version import Version

from keras_selfattn.training.distribute.distributed import is_multi_worker

__all__ = [
    "KERAS_FIX_ENV",
    "KERAS_FIX_VERSIONS",
    "keras_multi_worker_fix",
    "keras_needs_multi_worker_fix",
]

# [first, end): the Keras releases that carry both bugs. Checked on 3.15.1 (the
# version in constraints.txt) by the multi-worker tests; the code is the same
# since 3.0 (the first Keras 3) and on the main branch as of keras 3.15. Widen the
# range only after `tests/training/test_keras_fix.py` shows that a new release
# still needs it.
KERAS_FIX_VERSIONS = ((3, 0), (3, 16))
# "auto" (the version guard decides), "on" (force it: a newer Keras that still
# fails) or "off" (stock Keras: the test that proves the fix is still needed).
KERAS_FIX_ENV = "KERAS_SELFATTN_KERAS_MW_FIX"


def keras_needs_multi_worker_fix(version=None):
    """Whether Keras ``version`` (default: installed) needs `keras_multi_worker_fix`.

    True for the releases in `KERAS_FIX_VERSIONS` (pre-releases and development
    builds count as their release: ``3.15.2rc0`` is 3.15); the
    ``KERAS_SELFATTN_KERAS_MW_FIX`` environment variable overrides it with ``on``
    or ``off``.
    """
    override = os.environ.get(KERAS_FIX_ENV, "auto").strip().lower()
    if override in ("on", "1", "true"):
        return True
    if override in ("off", "0", "false"):
        return False
    if override != "auto":
        raise ValueError(
            f"{KERAS_FIX_ENV} must be auto, on or off. Received: {override!r}"
        )
    first, end = KERAS_FIX_VERSIONS
    release = Version(keras.__version__ if version is None else str(version)).release
    return first <= release[:2] < end


def _keras_tf_trainer():
    # The fix has to reach into the trainer module: the two bugs live in its
    # private functions, and no public hook changes them.
    from keras.src.backend.tensorflow import trainer

    return trainer


def _first_local_value(strategy, value):
    if isinstance(value, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(value)[0]
    return value


def _fixed_maybe_symbolic_build(original):
    """Bug 1: the symbolic build averages a *data batch* across replicas.

    Stock Keras calls ``strategy.reduce("MEAN", batch, axis=None)`` on the first
    distributed batch only to learn its shapes and dtypes. Under
    MultiWorkerMirroredStrategy that reduce is a cross-worker collective over a
    dict of int tensors and fails (``ValueError: Attempt to convert a value
    (PerReplica:...)``). The fix takes the first local replica's batch, which has
    the same structure, dtypes and per-replica shapes, and involves no collective.
    """

    @functools.wraps(original)
    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy
        if (
            strategy is None
            or iterator is None
            or data_batch is not None
            or not is_multi_worker(strategy)
        ):
            return original(self, iterator=iterator, data_batch=data_batch)
        for _, _, batches in iterator:
            data_batch = tf.nest.map_structure(
                functools.partial(_first_local_value, strategy),
                next(batches),
                expand_composites=False,
            )
            break
        return original(self, iterator=None, data_batch=data_batch)

    _maybe_symbolic_build.keras_selfattn_fix = True
    return _maybe_symbolic_build


def _fixed_reduce_per_replica(original):
    """Bug 2: the per-step logs are averaged along an axis that scalars lack.

    For ``reduction="mean"`` (what ``fit`` and ``evaluate`` use) stock Keras calls
    ``strategy.reduce("MEAN", v, axis=0)`` under MultiWorkerMirroredStrategy, which
    also averages *along* the first axis of each value: a scalar log fails with
    ``Invalid reduction dimension 0 for input with 0 dimensions``. The single-worker
    branch of the same function averages across replicas only (``tf.reduce_mean(
    local_results, axis=0)``); ``axis=None`` is that across workers. ``concat``
    (predict) and ``sum`` are left to Keras.
    """

    @functools.wraps(original)
    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and is_multi_worker(strategy):
            return tf.nest.map_structure(
                lambda v: strategy.reduce("MEAN", v, axis=None), values
            )
        return original(values, strategy, reduction)

    reduce_per_replica.keras_selfattn_fix = True
    return reduce_per_replica


_fix_lock = threading.Lock()
_fix_depth = 0
_fix_saved = None


@contextlib.contextmanager
def keras_multi_worker_fix(strategy=None):
    """Makes Keras 3 ``model.fit``/``evaluate`` work under MultiWorkerMirroredStrategy.

    Use it around ``fit`` (``train`` does)::

        with keras_multi_worker_fix(strategy):
            model.fit(...)

    Inside, two private Keras functions are replaced by the versions above (bug 1:
    the symbolic build, bug 2: the reduction of the logs); both wrap the originals
    and change behaviour only when the strategy runs on several workers; they are
    restored on exit. Nothing is patched when ``strategy`` is given and is not
    multi-worker, or when Keras is outside `KERAS_FIX_VERSIONS` (a warning then
    says what to do if ``fit`` fails). Nested and repeated use is safe.

    Yields:
        True when the fix is active.
    """
    global _fix_depth, _fix_saved
    if strategy is not None and not is_multi_worker(strategy):
        yield False
        return
    if not keras_needs_multi_worker_fix():
        first, end = KERAS_FIX_VERSIONS
        if os.environ.get(KERAS_FIX_ENV, "auto").strip().lower() == "auto":
            warnings.warn(
                f"keras {keras.__version__} is outside the versions known to need "
                "the multi-worker fix "
                f"({'.'.join(map(str, first))} <= keras < {'.'.join(map(str, end))}); "
                "running stock Keras. "
                "If fit fails with 'Attempt to convert a value (PerReplica' or "
                "'Invalid reduction dimension 0', "
                f"set {KERAS_FIX_ENV}=on.",
                stacklevel=3,
            )
        yield False
        return
    trainer = _keras_tf_trainer()
    with _fix_lock:
        if _fix_depth == 0:
            cls = trainer.TensorFlowTrainer
            _fix_saved = (cls._maybe_symbolic_build, trainer.reduce_per_replica)
            cls._maybe_symbolic_build = _fixed_maybe_symbolic_build(_fix_saved[0])
            trainer.reduce_per_replica = _fixed_reduce_per_replica(_fix_saved[1])
        _fix_depth += 1
    try:
        yield True
    finally:
        with _fix_lock:
            _fix_depth -= 1
            if _fix_depth == 0:
                (
                    trainer.TensorFlowTrainer._maybe_symbolic_build,
                    trainer.reduce_per_replica,
                ) = _fix_saved
                _fix_saved = None
