"""keras_selfattn: serializable Keras 3 attention layers, from text pairs to TF Serving.

import keras_selfattn as ksa
pe = ksa.layers.PositionalEncoding(num_hiddens=32)
attn = ksa.layers.MultiHeadSelfAttention(num_hiddens=32, num_heads=4)

Importing the package imports Keras and registers every serializable class (the
layers, the model's blocks, its loss, metric, schedule and optimizer), so
``keras.saving.load_model`` finds them whatever the import order. The other
subpackages (``keras_selfattn.text``, ``.training``, ``.serving``, ...) load when
imported.

Backends: the layers and the model run on any Keras backend; decoding,
``Translator`` and ``evaluate`` on TensorFlow and JAX; the command line, training
data, distribution, export and serving on TensorFlow (`keras_selfattn.backends`).
When the Keras backend asked for is not installed, importing the package raises
one `keras_selfattn.backends.MissingBackendError` (an ImportError) naming it; in
a ``keras-selfattn`` process (``python -m keras_selfattn``) the command line's
TensorFlow is chosen instead, in one line (`backends.choose_command_line_backend`).
"""

from keras_selfattn import backends

backends.choose_command_line_backend()  # keras-selfattn runs on TensorFlow
backends.check_backend()  # before Keras loads: a missing backend is one clear error
backends.import_keras()  # the command line without TensorFlow's import lines

from keras_selfattn import layers, models
from keras_selfattn.models import ModelConfig, build_seq2seq
from keras_selfattn.version import __version__

__all__ = [
    "ModelConfig",
    "__version__",
    "backends",
    "build_seq2seq",
    "layers",
    "models",
]
