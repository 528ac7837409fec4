"""tests/text builds no Keras model: skip the root conftest's per-test Keras reset.

The root fixture's `keras.backend.clear_session()` costs about 0.3 s a test here,
a third of this folder's run time; these tests touch neither the dtype policy nor
Keras' seed (tf.data shuffles take explicit seeds).
"""

import pytest


@pytest.fixture(autouse=True)
def _clean_keras_state():
    yield
