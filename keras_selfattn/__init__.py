"""keras_selfattn: serializable Keras 3 attention layers, from text pairs to TF Serving.

import keras_selfattn as ksa
pe = ksa.layers.PositionalEncoding(num_hiddens=32)
attn = ksa.layers.MultiHeadSelfAttention(num_hiddens=32, num_heads=4)

Importing the package is cheap: its subpackages and names load on first use
(so that ``keras-selfattn --help`` answers without importing TensorFlow). The
layers, blocks, loss and metric register themselves for ``.keras`` loading when
their modules load: at once if Keras is already imported, otherwise on first use
of ``ksa.layers``, ``ksa.models`` or ``ksa.build_seq2seq``. Import ``keras`` and then
``keras_selfattn`` before ``keras.saving.load_model``.

Backends: the layers and the model run on any Keras backend; decoding,
``Translator`` and ``evaluate`` on TensorFlow and JAX; the command line, training
data, distribution, export and serving on TensorFlow (`keras_selfattn.backends`).
When ``KERAS_BACKEND`` names a backend whose package is not installed, importing
Keras through this package raises one `keras_selfattn.backends.MissingBackendError`
(an ImportError) that names the package.
"""

import importlib
import sys

from keras_selfattn import _moved, backends
from keras_selfattn._lazy import lazy_package

__version__ = "0.1.0"

_moved.install()  # the old module paths, with a DeprecationWarning
# A Keras backend whose package is missing: one ImportError at ``import keras``.
backends.install_import_check()

__all__ = ["ModelConfig", "__version__", "build_seq2seq", "layers"]

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        "ModelConfig": "keras_selfattn.models.config",
        "build_seq2seq": "keras_selfattn.models.seq2seq",
    },
    submodules=(
        "backends",
        "choices",
        "cli",
        "decoding",
        "inference",
        "layers",
        "models",
        "plotting",
        "run_directory",
        "scoring",
        "serving",
        "text",
        "training",
        "translation",
        "workflows",
    ),
)

if "keras" in sys.modules:  # no start-up cost left to save: register for load_model now
    importlib.import_module("keras_selfattn.models.seq2seq")  # and the layers
    importlib.import_module("keras_selfattn.models.losses")  # a compiled model's loss
    importlib.import_module("keras_selfattn.models.schedules")  # and its schedule
    importlib.import_module("keras_selfattn.models.optimizers")  # and optimizer
