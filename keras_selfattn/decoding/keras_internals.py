"""The one place the decoding package reads Keras internals.

Keras has no public way to ask which dtype a layer reads a variable in (its
autocast under a mixed policy), nor to list a layer's own variables without
its sublayers'. `variable_reads` asks the private attributes that hold those
answers; tests/test_decoding.py checks them against the
installed Keras (docs/supported-versions.md gives the supported range).
"""

import keras


def variable_reads(model):
    """``(variable, own dtype, dtype read)`` for every variable of every layer
    of ``model`` (itself included), once per layer that owns it.

    A float variable that autocasts is read in its layer's compute dtype (a
    mixed policy's float16 or bfloat16), any other in its own dtype.
    """
    for layer in model._flatten_layers(include_self=True, recursive=True):
        for variable in layer._trainable_variables + layer._non_trainable_variables:
            own = keras.backend.standardize_dtype(variable._dtype)
            reads = own
            if variable._autocast and "float" in own:
                reads = layer.compute_dtype
            yield variable, own, reads
