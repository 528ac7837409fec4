"""Loading a ``.keras`` file of this package's models: the one place that does it.

`keras.saving.load_model` finds a custom class only once the module that
registers it has been imported. The package's names load lazily, so a process
that has imported only the command line or `keras_selfattn.translation` may not
have imported them yet; `load_model` imports every module whose classes a saved
model or its compile configuration holds (the model, its layers, the loss and
metric, the optimizer and its learning-rate schedule) and then loads.
"""

import keras

# Imported for their registrations (@keras.saving.register_keras_serializable).
from keras_selfattn.models import losses, optimizers, schedules, seq2seq  # noqa: F401

__all__ = ["load_model"]


def load_model(path, **kwargs):
    """``keras.saving.load_model(path, **kwargs)`` with the package's classes known.

    Args:
        path: a ``.keras`` file.
        **kwargs: passed to `keras.saving.load_model` (``compile``, ``safe_mode``).

    Returns:
        the loaded model.
    """
    return keras.saving.load_model(path, **kwargs)
