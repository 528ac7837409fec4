"""Each product of a served ``--preset small`` translator in float32, bfloat16 and
int8 weights dequantized to bfloat16, under TensorFlow's stock CPU kernels.

Run: .venv/bin/python benchmarks/served_precision.py [--quick] [--threads 1]
     [--rounds 15] [--beam 4]

The products are those of one decoder step at the rows a served batch of 32
sentences has (32 greedy, 32 x beam for the beam search), and the encoder's and
the memory projection's at 32 sentences of ``--source-len`` pieces, with the
shapes of ``--preset small`` (256 wide, 1,024-wide feed-forward and deep
output, 4,000 target pieces, a one-layer GRU fed the embedding and the
context). The output layer is measured over the whole vocabulary and over a
``--shortlist``-sized cut of it. Variants, all fed float32 and giving float32 as
a served graph's float32 search does:

- float32: ``x @ W``.
- bfloat16: ``cast(cast(x, bf16) @ W_bf16, f32)`` (oneDNN accumulates the
  product in float32; its output is rounded to bfloat16).
- int8 at use: ``W_int8`` with per-output-channel float32 scales, dequantized
  to bfloat16 at every call, then as bfloat16: an upper bound, since a served
  search dequantizes once per request before its loop (the "dequantize" column
  is that once-per-request cost; after it every step runs the bfloat16 product).
- as served, with a bias: float32 ``x @ W + b`` with ``W`` and ``b`` read from
  variables (the float32 export's fused product), against bfloat16
  ``cast(cast(x, bf16) @ W_bf16 + b_bf16, f32)`` with ``W_bf16`` and ``b_bf16``
  constants of the loop (the bfloat16 export's: one fused oneDNN product whose
  packed kernel oneDNN keeps between steps).

Each sample runs the product in a ``tf.while_loop`` inside one graph (as a
search runs its steps), so Python's dispatch is not timed. Every variant of a
product runs in the same process, interleaved round by round
(`_bench.interleaved`), and each ratio is the median of the per-round ratios to
float32; the float32 and bfloat16 matmul peaks (a square product) are measured
beside them, and each float32 product's GFLOP/s is given against that peak.
``--quick`` runs a few rounds at smaller sizes (two products, every variant), to
check the script runs.

End to end (``--run RUN``): the run exported once per variant of
`SERVED_EXPORTS` (`keras_selfattn.serving.export_run`: float32,
``precision="bfloat16"``, ``shortlist=N``, both, bfloat16 with
``quantize="int8"`` without and with the shortlist, one length group, XLA;
``--exports`` picks some, and any of them may end in
``+ratioR``: served with ``max_length_ratio=R``, each sentence's search capped
relative to its source, e.g. ``bfloat16+shortlist+ratio2`` or
``float32+ratio2``; the float32 baseline is always the plain export), each
loaded under the session loader (as TF Serving loads it, its own session with
``--threads`` intra-op threads) in this one process; every source of ``--test``
(default: the run's test split) is translated in batches of ``--batch`` by
``serving_default`` (greedy) and ``translate_nbest`` (beam 4), interleaved
batch by batch (each batch goes to every export in turn, the order rotating:
`_bench.interleaved_items`), so a slow spell of a shared machine falls on all
of them; each export's sentences/s, its speed against float32's (median of the
per-round ratios), the texts that differ from float32's, and greedy BLEU/chrF
against the references (sacrebleu). ``--same-source`` makes each batch one
source repeated ``--batch`` times (the first of each batch of the test set): rows
of equal length, none ending before the others, so every step computes every
row, the case a batch of mixed lengths leaves after its first sentences end.
``--quick`` serves a tiny run (`_bench.quick_run`, trained here unless ``--run``
gives one) and measures float32 against bfloat16 with a shortlist and a length
ratio.
"""

import argparse
import functools
import math
import os
import pathlib
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench


def small_products(batch, beam, source_len, vocab, shortlist):
    """``[(name, rows, inputs, outputs)]``: the products of ``--preset small``."""
    step = batch * beam
    tokens = batch * source_len
    return [
        ("output layer (tied, full vocabulary)", step, 256, vocab),
        (f"output layer ({shortlist} shortlisted)", step, 256, shortlist),
        ("deep output in (256->1024)", step, 256, 1024),
        ("deep output out (1024->256)", step, 1024, 256),
        ("attention query projection", step, 256, 256),
        ("attentional output [h;c]->256", step, 512, 256),
        ("GRU input kernel [emb;ctx]->3x256", step, 512, 768),
        ("GRU recurrent kernel 256->3x256", step, 256, 768),
        ("attention memory projection (once)", tokens, 256, 256),
        ("encoder Q/K/V (fused)", tokens, 256, 768),
        ("encoder attention output", tokens, 256, 256),
        ("encoder feed-forward in", tokens, 256, 1024),
        ("encoder feed-forward out", tokens, 1024, 256),
    ]


def _variants(rows, inputs, outputs, reps, seed=0):
    """``{name: zero-argument callable}``: ``reps`` of one product's variants."""
    import numpy as np
    import tensorflow as tf

    from keras_selfattn.models import precision

    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(rows, inputs)).astype("float32"))
    w = (rng.normal(size=(inputs, outputs)) / np.sqrt(inputs)).astype("float32")
    w32 = tf.constant(w)
    w16 = tf.constant(w, tf.bfloat16)
    q, scale = precision.quantize_int8(w)
    q, scale = tf.constant(q), tf.constant(scale)

    def repeated(product):
        """A graph that runs ``product`` ``reps`` times in a loop, as a search's
        loop runs its steps: no Python dispatch per product is timed."""

        @tf.function
        def run():
            def body(i, total):
                return i + 1, total + product()[0, 0]

            return tf.while_loop(lambda i, _: i < reps, body, (0, 0.0))[1]

        return lambda: run().numpy()

    def bf16():
        return tf.cast(tf.matmul(tf.cast(x, tf.bfloat16), w16), tf.float32)

    def int8():
        kernel = precision.dequantize(q, scale, tf.bfloat16)
        return tf.cast(tf.matmul(tf.cast(x, tf.bfloat16), kernel), tf.float32)

    def dequantize():
        return tf.cast(precision.dequantize(q, scale, tf.bfloat16), tf.float32)

    b = rng.normal(size=outputs).astype("float32")
    w_var, b_var = tf.Variable(w), tf.Variable(b)

    def bf16_served():  # the constants are made inside the loop, as served
        kernel = tf.constant(w.astype(tf.bfloat16.as_numpy_dtype))
        bias = tf.constant(b.astype(tf.bfloat16.as_numpy_dtype))
        product = tf.nn.bias_add(tf.matmul(tf.cast(x, tf.bfloat16), kernel), bias)
        return tf.cast(product, tf.float32)

    return {
        "float32": repeated(lambda: tf.matmul(x, w32)),
        "bfloat16": repeated(bf16),
        "int8 at use": repeated(int8),
        "dequantize": repeated(dequantize),
        "float32 served": repeated(lambda: tf.nn.bias_add(tf.matmul(x, w_var), b_var)),
        "bfloat16 served": repeated(bf16_served),
    }


def matmul_peak(size, rounds):
    """``(float32, bfloat16)`` GFLOP/s of a ``size``-cubed product, interleaved."""
    import tensorflow as tf

    a = tf.random.normal((size, size))
    b = tf.random.normal((size, size))
    a16, b16 = tf.cast(a, tf.bfloat16), tf.cast(b, tf.bfloat16)
    samples = _bench.interleaved(
        {
            "float32": lambda: tf.matmul(a, b).numpy(),
            "bfloat16": lambda: tf.matmul(a16, b16).numpy(),
        },
        rounds,
        warmup=1,
    )
    flops = 2 * size**3 / 1e9
    return tuple(flops / _bench.median(samples[k]) for k in ("float32", "bfloat16"))


# The as-served column: the bfloat16 export's product against the float32 one's.
SERVED_PAIR = ("bfloat16 served", "float32 served")


def measure(products, rounds, seconds, peak):
    """Table rows: per product its float32 time, GFLOP/s and the ratios."""
    table = []
    for name, rows, inputs, outputs in products:
        flops = 2 * rows * inputs * outputs
        # about ``seconds`` of float32 product a sample, at the measured peak
        reps = max(1, round(seconds * peak * 1e9 / flops))
        fns = _variants(rows, inputs, outputs, reps)
        samples = _bench.interleaved(fns, rounds)
        f32 = _bench.median(samples["float32"]) / reps
        table.append(
            [
                name,
                f"{rows}x{inputs}x{outputs}",
                f"{f32 * 1e6:.0f}",
                f"{flops / f32 / 1e9:.0f}",
                f"{flops / f32 / 1e9 / peak:.2f}",
                f"{_bench.paired_ratio(samples, 'bfloat16', 'float32'):.2f}",
                f"{_bench.paired_ratio(samples, 'int8 at use', 'float32'):.2f}",
                f"{_bench.paired_ratio(samples, 'dequantize', 'float32'):.2f}",
                f"{_bench.paired_ratio(samples, *SERVED_PAIR):.2f}",
            ]
        )
    return table


SERVED_EXPORTS = {
    "float32": {},
    "bfloat16": {"precision": "bfloat16"},
    "shortlist": {"shortlist": None},  # None: --frequent
    "bfloat16+shortlist": {"precision": "bfloat16", "shortlist": None},
    "bfloat16+int8": {"precision": "bfloat16", "quantize": "int8"},
    "bfloat16+int8+shortlist": {
        "precision": "bfloat16",
        "quantize": "int8",
        "shortlist": None,
    },
    # one length group a request (`--groups 1`): one loop, not two, on one thread
    "groups1": {"groups": 1},
    "bfloat16+int8+shortlist+groups1": {
        "precision": "bfloat16",
        "quantize": "int8",
        "shortlist": None,
        "groups": 1,
    },
    "xla": {"xla": True},
    "xla+shortlist": {"xla": True, "shortlist": None},
    "xla+bfloat16+shortlist": {"xla": True, "precision": "bfloat16", "shortlist": None},
}


# An export label's ending that adds ``max_length_ratio=R`` (``+ratio2``).
RATIO_MARK = "+ratio"


def export_options(label):
    """The `serving.export_run` options of an export label: a name of
    `SERVED_EXPORTS`, optionally followed by ``+ratioR`` (``max_length_ratio``
    R, a finite number > 0). ValueError for any other label."""
    name, mark, ratio = label.partition(RATIO_MARK)
    value = _ratio(ratio) if mark else None
    if name not in SERVED_EXPORTS or (mark and value is None):
        raise ValueError(
            f"an export is one of {', '.join(SERVED_EXPORTS)}, optionally followed "
            f"by {RATIO_MARK}R (R > 0, the length ratio). Received: {label!r}"
        )
    options = dict(SERVED_EXPORTS[name])
    if mark:
        options["max_length_ratio"] = value
    return options


def _ratio(text):
    """``text`` as a finite float > 0, or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _export_label(text):
    """``--exports`` item: an `export_options` label."""
    try:
        export_options(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _served_exports(run_dir, base, labels, frequent, threads, quick=False):
    """``{label: served_translator.Served}``: each variant exported and loaded
    in a session of its own, ``threads`` intra-op threads. ``quick``: each
    export made once beside the tiny run (`_bench.quick_export`)."""
    import served_translator
    import tensorflow as tf

    from keras_selfattn import serving

    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads,
        inter_op_parallelism_threads=1,
        use_per_session_threads=True,
    )

    served = {}
    for label in labels:
        options = export_options(label)
        if "shortlist" in options:
            options["shortlist"] = frequent
        if quick:
            version = _bench.quick_export(run_dir, **options)
        else:
            folder = base / label.replace("+", "_")
            version = serving.export_run(run_dir, folder, **options)
        served[label] = served_translator.Served(version, config)
    return served


def _scores(hypotheses, references):
    """``(BLEU, chrF)`` of sacrebleu, or blanks without references."""
    if not references:
        return "", ""
    import sacrebleu

    return (
        f"{sacrebleu.corpus_bleu(hypotheses, [references]).score:.1f}",
        f"{sacrebleu.corpus_chrf(hypotheses, [references]).score:.1f}",
    )


def served_passes(served, sources, batch, rounds):
    """For each signature (``serving_default``, ``translate_nbest``): the texts
    of every export in ``served`` (n-best: each source's best) and its
    per-round seconds over ``sources`` in batches of ``batch``, the exports
    interleaved (`_bench.interleaved_items`): ``(signature, texts, samples)``."""
    batches = [sources[i : i + batch] for i in range(0, len(sources), batch)]
    for name in ("serving_default", "translate_nbest"):
        texts = {key: s.texts(name, batches) for key, s in served.items()}
        if name == "translate_nbest":  # K per source: the best
            texts = {k: v[:: len(v) // len(sources)] for k, v in texts.items()}
        runs = {key: functools.partial(s.run, name) for key, s in served.items()}
        yield name, texts, _bench.interleaved_items(runs, batches, rounds)


def served_rows(served, pairs, batch, rounds):
    """Rows per signature and export: sentences/s, speed / float32, texts that
    differ from float32's, greedy BLEU and chrF."""
    sources = [s for s, _ in pairs]
    references = [t for _, t in pairs]
    rows = []
    for name, texts, samples in served_passes(served, sources, batch, rounds):
        for label in served:
            differ = sum(a != b for a, b in zip(texts[label], texts["float32"]))
            bleu, chrf = _scores(texts[label], references)
            rows.append(
                [
                    "greedy" if name == "serving_default" else "beam 4",
                    label,
                    f"{len(sources) / _bench.median(samples[label]):.1f}",
                    f"**{1 / _bench.paired_ratio(samples, label, 'float32'):.2f}**",
                    f"{differ} of {len(sources)}",
                    bleu,
                    chrf,
                ]
            )
    return rows


def same_source_batches(pairs, batch):
    """The first pair of each ``batch`` of ``pairs``, each repeated ``batch``
    times: batches whose rows have one length (``--same-source``)."""
    return [pair for pair in pairs[::batch] for _ in range(batch)]


def end_to_end(args, directory):
    """Prints the served table of the four exports of ``args.run``."""
    import tensorflow_text  # noqa: F401  (an export's text ops, if any)

    from keras_selfattn.text import read_pairs

    if not args.run:  # --quick
        args.run, args.test = _bench.quick_run(directory)
    run_dir = pathlib.Path(args.run)
    test = args.test or run_dir / "splits" / "test.tsv"
    pairs = read_pairs(test)[: args.limit]
    if args.same_source:
        pairs = same_source_batches(pairs, args.batch)
    labels = args.exports or list(SERVED_EXPORTS)
    if "float32" not in labels:
        labels = ["float32", *labels]
    if args.quick:
        labels = ["float32", "bfloat16+shortlist+ratio2"]
    served = _served_exports(
        run_dir, directory / "exports", labels, args.frequent, args.threads, args.quick
    )
    print(f"\nserved (session loader, batch {args.batch}): {len(pairs)} of {test}")
    _bench.print_table(
        [
            "search",
            "export",
            "sentences/s",
            "speed / float32 (median of rounds)",
            "texts that differ from float32's",
            "BLEU",
            "chrF",
        ],
        served_rows(served, pairs, args.batch, args.served_rounds),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few rounds, small")
    parser.add_argument("--threads", type=int, default=1, help="TF intra-op threads")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--source-len", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--shortlist", type=int, default=800)
    parser.add_argument("--run", help="end to end: a trained run directory")
    parser.add_argument("--test", help="end to end: the TSV (default: the run's)")
    parser.add_argument("--limit", type=int, default=None, help="first N pairs")
    parser.add_argument("--frequent", type=int, default=50, help="--shortlist N")
    parser.add_argument("--served-rounds", type=int, default=3)
    parser.add_argument("--served-only", action="store_true", help="no products")
    parser.add_argument(
        "--same-source",
        action="store_true",
        help="end to end: each batch one source repeated (rows of equal length)",
    )
    parser.add_argument(
        "--exports",
        nargs="+",
        type=_export_label,
        metavar="EXPORT",
        help=(
            "end to end: these exports beside float32 (default: all of "
            f"{', '.join(SERVED_EXPORTS)}); each may end in {RATIO_MARK}R, "
            "served with that length ratio"
        ),
    )
    args = parser.parse_args(argv)
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow already running (a test): its threads
        print("threads: as TensorFlow was already set up in this process")
    rounds, seconds, peak_size = args.rounds, 0.02, 2048
    batch, source_len = args.batch, args.source_len
    if args.quick:
        rounds, seconds, peak_size, batch, source_len = 3, 0.002, 256, 4, 4
    peak32, peak16 = matmul_peak(peak_size, max(3, rounds // 3))
    headers = [
        "product",
        "rows x in x out",
        "float32 us",
        "float32 GFLOP/s",
        "of float32 peak",
        "bfloat16 / float32",
        "int8 at use / float32",
        "dequantize / float32",
        "as served with a bias: bfloat16 / float32",
    ]
    beams = sorted({1, args.beam}) if not args.quick else [args.beam]
    for beam in beams if not args.served_only else ():
        print(f"\n{'greedy' if beam == 1 else f'beam {beam}'}: batch {batch}")
        products = small_products(batch, beam, source_len, args.vocab, args.shortlist)
        if args.quick:  # a step's product and an encoder's: every variant runs
            products = products[:1] + products[-1:]
        _bench.print_table(headers, measure(products, rounds, seconds, peak32))
    if args.run or args.quick:
        import tempfile

        with tempfile.TemporaryDirectory() as directory:
            if args.quick:
                args.limit, args.served_rounds = 32, 1
            end_to_end(args, pathlib.Path(directory))
    print(
        f"\nmatmul peak ({peak_size}^3, {args.threads} thread(s)): float32 "
        f"{peak32:.0f} GFLOP/s, bfloat16 {peak16:.0f} GFLOP/s"
    )
    measured = [] if args.served_only else [f"the products {rounds}"]
    if args.run or args.quick:
        measured.append(f"end to end {args.served_rounds}")
    print(
        f"interleaved rounds: {', '.join(measured)}; ratios are medians of "
        "per-round ratios (the machine is shared)"
    )
    print(_bench.environment_line())
    print("command:", _bench.command_line(__file__, argv))


if __name__ == "__main__":
    main()
