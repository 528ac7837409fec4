"""How well and how fast the demo learns: held-out exact match, BLEU, chrF, wall time.

Run: .venv/bin/python benchmarks/demo_accuracy.py [--out DIR] [--beam K]

Prints one table row per decoding method. Wall time is the whole `run_demo` call
(tokenizer, tf.data, XLA compilation, training, evaluation, figures) on this
machine; it is a figure to record, never a test.
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=None)
    parser.add_argument("--beam", type=int, default=4)
    args = parser.parse_args(argv)

    from keras_selfattn.inference import Translator, evaluate
    from keras_selfattn.jobs import run_demo

    out = args.out or tempfile.mkdtemp(prefix="demo_accuracy_")
    start = time.perf_counter()
    result, metrics = run_demo(out, verbose=2)
    wall = time.perf_counter() - start
    translator = Translator(
        result.model,
        result.tokenizer,
        result.model_config.max_source_len,
        result.model_config.max_target_len,
    )
    beam = evaluate(translator, result.test_pairs, beam_size=args.beam)
    epochs = len(result.history["loss"])
    print()
    print(
        "| decoding | held-out pairs | exact match | BLEU | chrF | epochs | wall time "
        "(train + eval) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, m in (("greedy", metrics["test"]), (f"beam {args.beam}", beam)):
        print(
            f"| {name} | {m['count']} | {100 * m['exact_match']:.2f}% | "
            f"{m['bleu']:.2f} | {m['chrf']:.2f} | {epochs} | {wall:.0f} s |"
        )


if __name__ == "__main__":
    main()
