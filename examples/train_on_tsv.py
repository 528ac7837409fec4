"""Train a translator on your own TSV file with plain model.fit.

Each line of the file is ``source<TAB>target``. Without --data the bundled corpus of
dates is used. Run: python examples/train_on_tsv.py --data pairs.tsv --epochs 5
(The `keras-selfattn train` command does the same with checkpoints, early stopping
and resuming; this script shows the pieces.)
"""

import argparse

import keras

import keras_selfattn as ksa
from keras_selfattn import text
from keras_selfattn.inference import Translator, evaluate
from keras_selfattn.models import MaskedAccuracy, masked_loss


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--data", default=None, help="source<TAB>target file (default: bundled dates)"
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--max-pairs", type=int, default=None)
    args = parser.parse_args(argv)

    pairs = text.read_pairs(args.data) if args.data else text.load_bundled_dates()
    pairs = pairs[: args.max_pairs]
    train, validation, test = text.split_pairs(pairs, (0.8, 0.1, 0.1), seed=0)
    tokenizer = text.PairTokenizer.build(
        train,
        text.TokenizerConfig(kind="word", split_digits=True),
        text.TokenizerConfig.for_target(kind="char"),
    )
    train_ds = text.make_dataset(
        train, tokenizer, batch_size=64, max_source_length=32, max_target_length=24
    )
    valid_ds = text.make_dataset(
        validation,
        tokenizer,
        batch_size=256,
        shuffle=False,
        max_source_length=32,
        max_target_length=24,
    )

    config = ksa.ModelConfig(
        num_hiddens=64,
        num_heads=4,
        num_layers=2,
        ffn_hiddens=128,
        decoder_units=128,
        embedding_dim=32,
        max_source_len=32,
        max_target_len=23,
    )
    model = ksa.build_seq2seq(
        tokenizer.source_vocab_size, tokenizer.target_vocab_size, config
    )
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3, clipnorm=1.0),
        loss=masked_loss(),
        metrics=[MaskedAccuracy()],
    )
    model.fit(
        train_ds,
        validation_data=valid_ds,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        shuffle=False,  # make_dataset shuffles, seeded, anew each epoch
    )

    translator = Translator(
        model, tokenizer, config.max_source_len, config.max_target_len
    )
    metrics = evaluate(translator, test[:500])
    print(
        f"exact match {metrics['exact_match']:.3f}  BLEU {metrics['bleu']:.1f}  chrF "
        f"{metrics['chrf']:.1f}"
    )
    return metrics


if __name__ == "__main__":
    main()
