"""Beam search: the length penalty inside the search vs only after it.

Run: .venv/bin/python benchmarks/beam_length_penalty.py [--quick] [--epochs N]

A task with long targets: the source is 4 to 12 digits, the target repeats each
digit three times (12 to 36 tokens). A small `build_seq2seq` model is trained on
it with ``model.fit`` for a few epochs -- on purpose not to perfection, so that the
searches have choices to make -- and held-out sources are decoded with beam
search (beam 4) in the same process, two ways:

* "after": every step keeps the best prefixes by raw log-probability; the GNMT
  length normalization ``log_prob / ((5 + length) / 6) ** alpha`` only reranks the
  survivors at the end (the search before this change);
* "during": every step keeps the best candidates by the normalized score
  (``beam_search_decode`` now, as GNMT and OpenNMT-tf).

Reported per alpha: exact match against the reference, the mean length of the
output minus the reference's, the mean normalized score of the best hypothesis
(the quantity both rank by; higher is better), and the share of sentences whose
best hypothesis differs between the two.
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

REPEAT = 3
VOCAB = 14  # 0-3 reserved, 4-13 the digits 0-9


def make_pairs(rng, count, min_len=4, max_len=12):
    """(sources, targets) int32 arrays, 0-padded; target = each digit three times."""
    import numpy as np

    lengths = rng.integers(min_len, max_len + 1, size=count)
    sources = np.zeros((count, max_len), "int32")
    targets = np.zeros((count, max_len * REPEAT), "int32")
    for row, length in enumerate(lengths):
        digits = rng.integers(4, VOCAB, size=length)
        sources[row, :length] = digits
        targets[row, : length * REPEAT] = np.repeat(digits, REPEAT)
    return sources, targets


def train_model(epochs, count, quick, seed):
    import keras
    import numpy as np

    from keras_selfattn.models import build_seq2seq, masked_loss
    from keras_selfattn.reserved_ids import END_ID, START_ID

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    sources, targets = make_pairs(rng, count)
    lengths = (targets != 0).sum(1)
    target_in = np.concatenate([np.full((count, 1), START_ID, "int32"), targets], 1)
    target_out = np.concatenate([targets, np.zeros((count, 1), "int32")], 1)
    target_out[np.arange(count), lengths] = END_ID
    width = 16 if quick else 64
    model = build_seq2seq(
        VOCAB,
        VOCAB,
        num_hiddens=width,
        num_heads=2,
        num_layers=1,
        ffn_hiddens=2 * width,
        decoder_units=width,
        embedding_dim=16,
        dropout=0.0,
        max_source_len=16,
        max_target_len=REPEAT * 12,
        seed=seed,
    )
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=masked_loss)
    history = model.fit(
        {"source": sources, "target_in": target_in},
        target_out,
        batch_size=64,
        epochs=epochs,
        verbose=0,
    )
    return model, history.history["loss"][-1]


def decode_both(model, sources, beam, max_len, alpha):
    import tensorflow as tf

    from keras_selfattn import decoding

    class RankByLogProb(decoding.BeamSearch):
        """The search before the change: each step ranks by raw log-probability;
        the length normalization only reranks the survivors at the end."""

        def candidate_scores(self, total, lengths, finished):
            return total

    results = {}
    strategies = {
        "after": RankByLogProb(beam, alpha),
        "during": decoding.BeamSearch(beam, alpha),
    }
    for name, strategy in strategies.items():
        search = tf.function(
            functools.partial(
                decoding.decode, model, strategy=strategy, max_len=max_len
            )
        )
        out = search(tf.constant(sources))
        results[name] = {k: v.numpy()[:, 0] for k, v in out.items()}
    return results


def main(argv=None):
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--train-pairs", type=int, default=6000)
    parser.add_argument("--eval-pairs", type=int, default=500)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.train_pairs, args.eval_pairs = 1, 256, 16

    model, loss = train_model(args.epochs, args.train_pairs, args.quick, args.seed)
    sources, targets = make_pairs(np.random.default_rng(args.seed + 1), args.eval_pairs)
    references = [list(row[row != 0]) for row in targets]
    max_len = REPEAT * 12 + 1
    rows = []
    for alpha in (0.6, 1.0, 2.0):
        results = decode_both(model, sources, args.beam, max_len, alpha)
        cells = [f"{alpha}"]
        best = {}
        for name in ("after", "during"):
            out = results[name]
            outputs = [
                [t for t in row[: length - 1]]  # drop the end id
                for row, length in zip(out["ids"], out["lengths"])
            ]
            best[name] = outputs
            exact = np.mean([o == r for o, r in zip(outputs, references)])
            length_gap = np.mean([len(o) - len(r) for o, r in zip(outputs, references)])
            cells += [
                f"{100 * exact:.1f}%",
                f"{length_gap:+.2f}",
                f"{np.mean(out['scores']):.4f}",
            ]
        differ = np.mean([a != b for a, b in zip(best["after"], best["during"])])
        rows.append([*cells, f"{100 * differ:.1f}%"])
    print(
        f"Beam {args.beam}, {args.eval_pairs} held-out sources (targets 12-36 tokens); "
        f"model trained {args.epochs} epochs on {args.train_pairs} pairs, "
        f"final loss {loss:.3f}."
    )
    _bench.print_table(
        [
            "alpha",
            "exact, after",
            "length gap, after",
            "best score, after",
            "exact, during",
            "length gap, during",
            "best score, during",
            "best differs",
        ],
        rows,
    )
    print()
    print(_bench.environment_line())
    print(f"Command: `{_bench.command_line(__file__, argv)}`")


if __name__ == "__main__":
    main()
