"""Shared pytest setup: quiet TensorFlow, deterministic seeds, a clean dtype policy."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import pytest


@pytest.fixture(autouse=True)
def _clean_keras_state():
    """Every test starts in float32 with a fixed seed and leaves it that way."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()
