"""tests/text builds no Keras model: skip the root conftest's per-test Keras reset.

These tests touch neither the dtype policy nor Keras' seed (tf.data shuffles take
explicit seeds). (The root fixture's reset once cost about 0.3 s a test here, a full
garbage collection; it no longer collects.)
"""

import pytest


@pytest.fixture(autouse=True)
def _clean_keras_state():
    yield
