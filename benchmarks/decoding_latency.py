"""Decoding latency: greedy and beam vs one teacher-forced pass; the SavedModel.

Run: .venv/bin/python benchmarks/decoding_latency.py [--quick]
         [--rounds N] [--serving-calls N]

The demo model (untrained weights; the end id's logit is pushed down so that
every search runs the full 30 steps), sources of 16 tokens, 30 output tokens,
batch 1 and 32. Each search runs inside ``tf.function`` (graph mode, no XLA, as
a SavedModel runs it) and is compared with ONE teacher-forced forward pass of
the model on (B, 16) sources and (B, 30) targets, also in ``tf.function``: the
encoder once, 30 decoder steps, the logits -- the bound a cached in-graph loop
can approach, since a search does that work plus the choice of the next token.
Target: greedy within 2x of it. "eager" is ``greedy_decode`` called eagerly, as
``Translator.translate`` calls it: it dispatches to a graph traced once per
model and setting (before that cache, the loop ran op by op, 20-50x slower:
benchmarks/RESULTS.md, "What the profile found").

Second table: the model exported with `keras_selfattn.serving.export_translator`
(text in, text out: tokenization, encoder, greedy ``tf.while_loop``,
detokenization) and loaded with the session-based loader TF Serving uses
(``tf.compat.v1.saved_model.loader.load``), called with batch 1 and 32 demo
sentences, interleaved: median and 99th percentile latency of ``session.run``.
"""

import argparse
import functools
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

OUTPUT_TOKENS = 30
SOURCE_TOKENS = 16
BEAM = 4


def demo_model(max_target_len, quick):
    """(model, tokenizer, demo sources) with the end id's logit pushed down."""
    from keras_selfattn import text
    from keras_selfattn.decoding import END_ID
    from keras_selfattn.jobs import DEMO_MODEL_CONFIG, DEMO_TRAIN_CONFIG
    from keras_selfattn.models import ModelConfig, build_seq2seq
    from keras_selfattn.text import load_pairs
    from keras_selfattn.training.data.run_tokenizer import tokenizer_configs

    pairs = load_pairs(None)[: 200 if quick else 5000]
    tokenizer = text.PairTokenizer.build(pairs, *tokenizer_configs(DEMO_TRAIN_CONFIG))
    config = ModelConfig(
        **{**vars(DEMO_MODEL_CONFIG), "max_target_len": max_target_len}
    )
    if quick:
        config = ModelConfig(**{**vars(config), **_bench.TINY_MODEL})
    model = build_seq2seq(
        tokenizer.source_vocab_size, tokenizer.target_vocab_size, config, seed=0
    )
    logits = model.logits_dense
    kernel, bias = logits.get_weights()
    bias[END_ID] = -1e4  # never the best token: every search runs max_len steps
    logits.set_weights([kernel, bias])
    return model, tokenizer, [source for source, _ in pairs]


def search_table(model, batches, rounds, quick):
    import numpy as np
    import tensorflow as tf

    from keras_selfattn.decoding import START_ID, beam_search_decode, greedy_decode

    forward = tf.function(
        lambda s, t: model({"source": s, "target_in": t}, training=False)
    )
    greedy = tf.function(lambda s: greedy_decode(model, s, OUTPUT_TOKENS)["ids"])
    beam = tf.function(
        lambda s: beam_search_decode(model, s, BEAM, OUTPUT_TOKENS)["ids"]
    )
    rows = []
    rng = np.random.default_rng(0)
    vocab = model.source_vocab_size
    for batch in batches:
        source = tf.constant(
            rng.integers(4, vocab, size=(batch, SOURCE_TOKENS)).astype("int32")
        )
        target = tf.constant(np.full((batch, OUTPUT_TOKENS), START_ID, "int32"))
        assert greedy(source).shape[1] == OUTPUT_TOKENS
        fns = {
            "forward": lambda source=source, target=target: forward(
                source, target
            ).numpy(),
            "greedy": lambda source=source: greedy(source).numpy(),
            f"beam {BEAM}": lambda source=source: beam(source).numpy(),
            "greedy eager": lambda source=source: greedy_decode(
                model, source, OUTPUT_TOKENS
            )["ids"].numpy(),
        }
        calls = 1 if quick else _bench.calls_for(fns["greedy"], 0.1)
        # --quick: one untimed call each (the trace), not two
        samples = _bench.interleaved(fns, rounds, calls, warmup=1 if quick else 2)
        greedy_ratio = _bench.paired_ratio(samples, "greedy", "forward")
        rows.append(
            [
                batch,
                _bench.ms(_bench.median(samples["forward"])),
                _bench.ms(_bench.median(samples["greedy"])),
                f"**{greedy_ratio:.2f}**",
                "yes"
                if greedy_ratio <= 2.0
                else f"no (+{100 * (greedy_ratio / 2 - 1):.0f}% over 2x)",
                _bench.ms(_bench.median(samples[f"beam {BEAM}"])),
                f"{_bench.paired_ratio(samples, f'beam {BEAM}', 'forward'):.2f}",
                _bench.ms(_bench.median(samples["greedy eager"])),
                f"{_bench.paired_ratio(samples, 'greedy eager', 'forward'):.2f}",
            ]
        )
    return rows


def saved_model_table(model, tokenizer, sources, batches, calls):

    from keras_selfattn.inference import Translator
    from keras_selfattn.serving import export_translator

    translator = Translator(
        model, tokenizer, max_source_len=32, max_target_len=OUTPUT_TOKENS - 1
    )
    with tempfile.TemporaryDirectory(prefix="decoding_latency_export_") as base:
        version_dir = export_translator(translator, base, warmup_texts=sources[:2])
        return _serving_rows(version_dir, sources, batches, calls)


def _serving_rows(version_dir, sources, batches, calls):
    """The table's rows: ``calls`` session runs per batch size, interleaved."""
    import tensorflow as tf

    rows = []
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(
            session, ["serve"], str(version_dir)
        )
        signature = meta_graph.signature_def["serving_default"]
        feed_name = signature.inputs["text"].name
        fetch = {name: info.name for name, info in signature.outputs.items()}
        functions = {}
        for batch in batches:
            texts = [s.encode("utf-8") for s in sources[:batch]]
            out = session.run(fetch, {feed_name: texts})
            assert len(out["translation"]) == batch
            functions[batch] = functools.partial(session.run, fetch, {feed_name: texts})
        samples = _bench.interleaved(functions, calls, 1, warmup=3)
        for batch in batches:
            values = samples[batch]
            rows.append(
                [
                    batch,
                    _bench.ms(_bench.median(values)),
                    _bench.ms(_bench.percentile(values, 99)),
                    f"{_bench.median(values) / batch * 1000:.2f}",
                    len(values),
                ]
            )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny model, 2 rounds (smoke run)"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="timing rounds (default 9)"
    )
    parser.add_argument(
        "--serving-calls",
        type=int,
        default=None,
        help="session.run calls per batch size for the percentiles (default 200)",
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 9)
    serving_calls = args.serving_calls or (3 if args.quick else 200)
    batches = (2,) if args.quick else (1, 32)  # --quick: one row per table

    model, tokenizer, sources = demo_model(OUTPUT_TOKENS - 1, args.quick)
    rows = search_table(model, batches, rounds, args.quick)
    serving_rows = saved_model_table(model, tokenizer, sources, batches, serving_calls)

    print()
    print(
        f"Decoding {OUTPUT_TOKENS} tokens from {SOURCE_TOKENS}-token sources, demo "
        "model, float32, tf.function (graph, no XLA) unless eager; ratios to one "
        "teacher-forced forward pass:"
    )
    print()
    _bench.print_table(
        [
            "batch",
            "forward ms",
            "greedy ms",
            "greedy / forward",
            "within 2x?",
            f"beam {BEAM} ms",
            f"beam {BEAM} / forward",
            "greedy eager ms",
            "eager / forward",
        ],
        rows,
    )
    print()
    print(
        "SavedModel (serving_default: text in, greedy, text out) under the session "
        f"loader, {serving_calls} calls per batch size, interleaved:"
    )
    print()
    _bench.print_table(
        ["batch", "median ms", "p99 ms", "median ms per sentence", "calls"],
        serving_rows,
    )
    print()
    print(f"median of {rounds} interleaved rounds; {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
