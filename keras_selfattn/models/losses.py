"""What training measures on padded targets: the masked loss and accuracy.

Both ignore the target positions that hold the padding id (0), so a batch padded to
its longest sentence is scored on its real tokens only (the mean over real tokens,
not over the padded grid).
"""

import keras
from keras import ops

from keras_selfattn.layers.arguments import check_rate
from keras_selfattn.reserved_ids import PAD_ID

__all__ = ["MaskedAccuracy", "MaskedCrossEntropy", "masked_loss"]

_MEAN_REDUCTIONS = ("sum_over_batch_size", "mean")


@keras.saving.register_keras_serializable(package="keras_selfattn")
class MaskedCrossEntropy(keras.losses.Loss):
    """Token cross-entropy from logits over non-padding targets, with label smoothing.

    For a target ``y`` (not padding) and logits ``z`` over ``V`` classes the token
    loss is ``-(1 - eps) log p_y - eps * mean_v log p_v`` with ``p = softmax(z)``:
    the cross-entropy against the smoothed target ``(1 - eps) onehot(y) + eps / V``,
    the convention of ``keras.losses.CategoricalCrossentropy(label_smoothing=eps)``
    (Szegedy et al. 2016). Positions whose target is ``pad_id`` count for nothing,
    whatever their logits; with the default reduction the result is the mean over
    the real tokens (as ``SparseCategoricalCrossentropy(ignore_class=pad_id)``,
    which this equals at ``label_smoothing=0``). The padding is read from the
    targets only: a Keras mask on the predictions is not applied again.

    Called without targets, a loss returns a copy with the given settings
    changed: ``loss(label_smoothing=0.1)``. `masked_loss` is such an instance.

    Args:
        label_smoothing: float in [0, 1), the share ``eps`` of the target spread
            uniformly over the classes. 0 (default): plain cross-entropy.
        pad_id: int, the target id to ignore (0).
        name: the loss name.
        reduction: a Keras loss reduction (``"sum_over_batch_size"`` default).
        dtype: the loss dtype (None: Keras' float type).

    Example:

    >>> import numpy as np
    >>> from keras_selfattn.models import MaskedCrossEntropy
    >>> logits = np.zeros((1, 3, 4), "float32")          # uniform: log 4 per token
    >>> targets = np.array([[1, 2, 0]])                  # the last is padding
    >>> round(float(MaskedCrossEntropy()(targets, logits)), 4)
    1.3863
    >>> from keras_selfattn.models import masked_loss     # an instance
    >>> smoothed = masked_loss(label_smoothing=0.1)       # a configured copy
    >>> smoothed.label_smoothing, masked_loss.label_smoothing
    (0.1, 0.0)
    """

    def __init__(
        self,
        label_smoothing=0.0,
        pad_id=PAD_ID,
        name="masked_crossentropy",
        reduction="sum_over_batch_size",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.label_smoothing = check_rate("label_smoothing", label_smoothing)
        self.pad_id = int(pad_id)

    def __call__(self, y_true=None, y_pred=None, sample_weight=None, **settings):
        if y_true is None and y_pred is None:
            # Called without targets: a copy with ``settings`` changed. This is
            # what lets `masked_loss` (an instance) serve as a factory too.
            return type(self).from_config({**self.get_config(), **settings})
        if settings or y_true is None or y_pred is None:
            raise ValueError(
                "A MaskedCrossEntropy takes (y_true, y_pred[, sample_weight]), or no "
                "targets and settings to change. Received: "
                f"y_true={'None' if y_true is None else 'a tensor'}, "
                f"y_pred={'None' if y_pred is None else 'a tensor'}, "
                f"settings={sorted(settings)}"
            )
        # The padding comes from the targets. A Keras mask on y_pred (the model's
        # own target mask) is dropped (the copy does not carry it), so that Keras
        # does not weight the real tokens a second time.
        return super().__call__(y_true, ops.copy(y_pred), sample_weight)

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        valid = ops.not_equal(y_true, self.pad_id)
        # Padding positions get target 0 and zero logits (any finite value does):
        # their loss is computed, then dropped, and can never be NaN.
        logits = ops.where(ops.expand_dims(valid, -1), y_pred, 0.0)
        targets = ops.where(valid, y_true, 0)
        if self.label_smoothing:
            # One log-softmax serves both terms (-log p_y and the mean over the
            # classes): a separate sparse cross-entropy would normalize the
            # (B, T, V) logits a second time, forward and backward (the loss
            # cost half as much CPU this way: benchmarks/RESULTS.md, "Step cost").
            eps = self.label_smoothing
            log_probs = ops.log_softmax(logits, axis=-1)
            picked = ops.take_along_axis(log_probs, targets[..., None], axis=-1)
            uniform = ops.mean(log_probs, axis=-1)
            losses = -(1.0 - eps) * picked[..., 0] - eps * uniform
        else:
            losses = ops.sparse_categorical_crossentropy(
                targets, logits, from_logits=True
            )
        losses = ops.where(valid, losses, 0.0)
        if self.reduction in _MEAN_REDUCTIONS:
            # Keras divides the sum by the number of positions; weighting the
            # real ones by positions / real tokens makes that the mean over real
            # tokens (what Keras does for a loss with ignore_class).
            valid = ops.cast(valid, losses.dtype)
            total = ops.cast(ops.size(valid), losses.dtype)
            losses = losses * ops.divide_no_nan(total, ops.sum(valid))
        return losses

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config


# The masked token cross-entropy: a loss and, called without targets, a factory.
# ``compile(loss=masked_loss)`` uses it as it is (no label smoothing);
# ``compile(loss=masked_loss())`` or ``masked_loss(label_smoothing=0.1)`` gets a new
# `MaskedCrossEntropy` with those settings. Registered and serialized either way.
masked_loss = MaskedCrossEntropy()


@keras.saving.register_keras_serializable(package="keras_selfattn")
class MaskedAccuracy(keras.metrics.Metric):
    """Share of non-padding target tokens whose arg-max prediction is right."""

    def __init__(self, name="accuracy", pad_id=PAD_ID, **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.correct = self.add_variable((), initializer="zeros", name="correct")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        weights = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            weights = weights * ops.cast(sample_weight, "float32")
        hits = ops.cast(ops.equal(predicted, y_true), "float32") * weights
        self.correct.assign_add(ops.sum(hits))
        self.count.assign_add(ops.sum(weights))

    def result(self):
        return ops.divide_no_nan(self.correct, self.count)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
