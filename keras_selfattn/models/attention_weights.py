"""`attention_weights_model`: the attention weights of a trained functional model.

Keras 3 (3.15) cannot make a model from a layer called again on a trained model's
intermediate tensors (``keras.Model(model.inputs, layer(x)[1])`` fails with "Output
... is not connected to inputs"), and running the layers eagerly on ``predict``
outputs loses the Keras mask (weight then lands on padding). This replays the
model's graph on new inputs with the same layers (the same weights) and asks
every attention layer for its weights on the way.
"""

import inspect

import keras

__all__ = ["attention_weights_model"]


def _returns_scores(layer):
    return "return_attention_scores" in inspect.signature(layer.call).parameters


class _AttentionTap(keras.layers.Layer):
    """Calls ``layer`` with ``return_attention_scores=True`` (sharing its weights).

    A new layer per attention layer, because Keras 3.15 checks a functional
    graph's connections with the output structure of a layer's *first* call: a
    layer first called without scores cannot add them in a later call.
    """

    def __init__(self, layer, **kwargs):
        super().__init__(
            name=f"{layer.name}_with_scores", dtype=layer.dtype_policy, **kwargs
        )
        self.layer = layer
        self.supports_masking = True

    def call(self, *args, **kwargs):
        return self.layer(*args, return_attention_scores=True, **kwargs)

    def compute_output_spec(self, *args, **kwargs):
        return self.layer.compute_output_spec(
            *args, return_attention_scores=True, **kwargs
        )


def attention_weights_model(model):
    """A model mapping ``model``'s inputs to the weights of each attention layer.

    Every layer of the functional ``model`` whose ``call`` takes
    ``return_attention_scores`` (`MultiHeadSelfAttention`,
    `TransformerEncoderBlock`, `BahdanauDecoder`, ``keras.layers.MultiHeadAttention``)
    is called with it set, and `BahdanauAttention`'s weights (its second output)
    are taken as they come. The graph is replayed with the original layers, so
    the weights are the trained ones, and Keras masks flow as in ``model``
    (padding gets weight 0). The returned model is for inspection: it shares
    ``model``'s layers and is not meant to be saved.

    Args:
        model: a functional ``keras.Model`` (a `Seq2Seq`, or your own model built
            with these layers).

    Returns:
        A ``keras.Model`` with ``model``'s inputs and a dict of outputs, one per
        attention layer, keyed by layer name: ``(B, num_heads, T, T)`` for
        self-attention, ``(B, S, T)`` for the decoder's attention over the source.

    Raises:
        ValueError: ``model`` is not functional, or has no attention layer.

    Example:

    >>> import numpy as np, keras_selfattn
    >>> from keras_selfattn.models import attention_weights_model
    >>> model = keras_selfattn.build_seq2seq(20, 12, num_hiddens=16, num_heads=2,
    ...     num_layers=1, ffn_hiddens=32, decoder_units=16, embedding_dim=8)
    >>> weights = attention_weights_model(model).predict(
    ...     {"source": np.array([[5, 6, 0]]), "target_in": np.array([[2, 4]])},
    ...     verbose=0)
    >>> {name: w.shape for name, w in sorted(weights.items())}
    {'decoder': (1, 2, 3), 'encoder_block_0': (1, 2, 3, 3)}
    >>> float(weights["decoder"][0, :, 2].max())   # the padded source position
    0.0
    """
    if not isinstance(model, keras.Model) or not hasattr(model, "operations"):
        raise ValueError(
            "attention_weights_model needs a functional keras.Model. Received: "
            f"model={model!r}"
        )
    captured = {}
    call_function = _capturing_call(captured)
    try:
        replayed = keras.models.clone_model(
            model, clone_function=lambda layer: layer, call_function=call_function
        )
    except ValueError as error:
        raise ValueError(
            "attention_weights_model needs a functional keras.Model (built with "
            f"keras.Input). Received: model={model.name!r} ({error})"
        ) from error
    if not captured:
        raise ValueError(
            "The model has no attention layer (none takes return_attention_scores, "
            f"and no BahdanauAttention). Received: model={model.name!r}"
        )
    return keras.Model(replayed.input, dict(captured), name=f"{model.name}_attention")


def _capturing_call(captured):
    """A `clone_model` ``call_function`` that puts each layer's weights in ``captured``.

    The layers are called as in the original graph; an attention layer's weights
    go into ``captured[layer.name]``.
    """
    from keras_selfattn.layers import BahdanauAttention

    def call_function(layer, *args, **kwargs):
        if isinstance(layer, BahdanauAttention):
            outputs = layer(*args, **kwargs)
            captured[layer.name] = outputs[1]
            return outputs
        if not _returns_scores(layer) or kwargs.get("return_attention_scores"):
            outputs = layer(*args, **kwargs)
            if kwargs.get("return_attention_scores"):
                captured[layer.name] = outputs[1]
            return outputs
        outputs = _AttentionTap(layer)(*args, **kwargs)
        captured[layer.name] = outputs[1]
        rest = (outputs[0], *outputs[2:])  # the outputs of the original call
        return rest[0] if len(rest) == 1 else rest

    return call_function
