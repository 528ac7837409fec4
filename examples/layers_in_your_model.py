"""The layers inside your own Keras model: functional and subclassed.

A toy task that needs attention and positions: is the first token of the
sequence repeated later in it? Run: python examples/layers_in_your_model.py
"""

import argparse

import keras
import numpy as np

import keras_selfattn as ksa


def make_data(n=2048, length=12, vocab=20, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, size=(n, length))
    lengths = rng.integers(4, length + 1, size=n)
    ids[np.arange(length)[None, :] >= lengths[:, None]] = 0  # 0 = padding
    labels = np.array([row[0] in row[1:n_] for row, n_ in zip(ids, lengths)], "float32")
    return ids.astype("int32"), labels


def functional_model(vocab=20, width=32):
    ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(vocab, width, mask_zero=True)(
        ids
    )  # the mask hides padding keys
    x = ksa.layers.PositionalEncoding(width, max_len=64)(x)
    x = ksa.layers.MultiHeadSelfAttention(width, num_heads=4)(x)
    x = keras.layers.GlobalAveragePooling1D()(x)  # honours the mask too
    return keras.Model(ids, keras.layers.Dense(1, activation="sigmoid")(x))


class SubclassedModel(keras.Model):
    """The same network as a subclass, passing valid lengths explicitly."""

    def __init__(self, vocab=20, width=32, **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(vocab, width)
        self.positions = ksa.layers.PositionalEncoding(width, max_len=64)
        self.attention = ksa.layers.MultiHeadSelfAttention(width, num_heads=4)
        self.head = keras.layers.Dense(1, activation="sigmoid")

    def call(self, ids, training=None):
        valid_lens = keras.ops.sum(keras.ops.cast(ids > 0, "int32"), axis=1)
        x = self.positions(self.embedding(ids), training=training)
        x = self.attention(x, valid_lens=valid_lens, training=training)
        return self.head(x[:, 0])  # read out at the first token


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    args = parser.parse_args(argv)
    ids, labels = make_data()
    for model in (functional_model(), SubclassedModel()):
        model.compile(
            optimizer=keras.optimizers.Adam(3e-3),
            loss="binary_crossentropy",
            metrics=["accuracy"],
        )
        history = model.fit(
            ids,
            labels,
            epochs=args.epochs,
            steps_per_epoch=args.steps_per_epoch,
            batch_size=64,
            verbose=2,
        )
        print(
            type(model).__name__,
            "final accuracy",
            round(history.history["accuracy"][-1], 3),
        )
    return history


if __name__ == "__main__":
    main()
