"""The TPU audit of a train step, on the CPU: input shapes, host ops, the HLO verdict.

The audit of `train`'s own step is in test_strategy.py.
"""

import keras
import numpy as np
import tensorflow as tf

from keras_selfattn.training.distribute.tpu_audit import audit_train_step


def _model(hosted):
    source = keras.Input((4,), batch_size=8, name="source")
    target = keras.Input((3,), batch_size=8, name="target")
    x = keras.layers.Concatenate()([source, target])
    if hosted:
        x = keras.layers.Lambda(
            lambda t: tf.ensure_shape(
                tf.py_function(lambda v: v * 2.0, [t], tf.float32), t.shape
            ),
            output_shape=(8, 7),
        )(x)
    model = keras.Model({"source": source, "target": target}, keras.layers.Dense(1)(x))
    model.compile("sgd", "mse")
    return model


def _data(batch, drop_remainder):
    features = {
        "target": np.ones((20, 3), "float32"),
        "source": np.ones((20, 4), "float32"),
    }
    data = tf.data.Dataset.from_tensor_slices((features, np.ones((20, 1), "float32")))
    return data.batch(batch, drop_remainder=drop_remainder)


def test_a_static_step_passes_and_names_its_inputs():
    audit = audit_train_step(_model(hosted=False), _data(8, drop_remainder=True))
    assert audit.ok, (audit.compile_error, audit.host_ops, audit.string_ops)
    # Paths through the (features, labels) tuple and the feature dict, keys sorted.
    assert audit.input_shapes == {"0/source": [8, 4], "0/target": [8, 3], "1": [8, 1]}
    assert "ENTRY" in audit.hlo and not audit.dynamic_shape_ops


def test_a_partial_batch_is_not_static():
    audit = audit_train_step(_model(hosted=False), _data(8, drop_remainder=False))
    assert not audit.static_inputs and not audit.ok
    assert audit.input_shapes["0/source"] == [None, 4] and audit.hlo == ""


def test_the_audit_finds_host_ops():
    audit = audit_train_step(_model(hosted=True), _data(8, drop_remainder=True))
    assert "EagerPyFunc" in audit.host_ops and not audit.ok
