"""The served translator under the session loader: speed against a baseline export,
texts compared, and where the time goes (a profile per op category).

Run: .venv/bin/python benchmarks/served_translator.py --run RUN --test TSV
         [--baseline SAVED_MODEL] [--export-option NAME=VALUE ...] [--batch 32]
         [--rounds 3] [--limit N] [--profile] [--no-beam]
     .venv/bin/python benchmarks/served_translator.py --quick [--run RUN --test TSV]

The run is exported with this tree's code (`keras_selfattn.serving.export_run`,
with the given export options) and loaded as TF Serving loads it
(``tf.compat.v1.saved_model.loader.load`` in a ``tf.compat.v1.Session``). With
``--baseline`` (a SavedModel written from the same run by an older tree) both are
loaded in this one process: every test source is translated by both, greedy
(``serving_default``) and beam (``translate_nbest``), and the texts compared; then
the passes over the test set in batches are timed round by round, interleaved (see
_bench.py), and the table gives the median of the per-round ratios.

``--profile`` traces one greedy and one beam pass of the new export
(``RunOptions.FULL_TRACE``: every op's time, inside the decoding loop too) and
sums the op times per category; the model's FLOPs per sentence are counted from
its configuration and the sentences' own lengths, and set against a 1024^3
float32 ``tf.matmul`` timed in the same process.
"""

import argparse
import collections
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

# Op types per category of the profile (anything else: "other").
CATEGORIES = {
    "matmul": {"MatMul", "BatchMatMulV2", "BatchMatMulV3", "_MklMatMul", "Einsum"}
    | {"_MklBatchMatMulV2", "_FusedMatMul", "_MklFusedMatMul", "_MklNativeMatMul"}
    | {"_MklNativeFusedMatMul", "_MklNativeBatchMatMulV2", "_MklEinsum"},
    "softmax and log-softmax": {"Softmax", "LogSoftmax", "_MklSoftmax"},
    "argmax, top-k, sort": {"ArgMax", "TopKV2", "TopK"},
    "gather, one-hot, select": {"GatherV2", "ResourceGather", "OneHot", "Select"}
    | {"SelectV2", "GatherNd", "Where", "ScatterNd", "TensorScatterUpdate"},
    "element-wise math": {"AddV2", "Add", "Mul", "Sub", "RealDiv", "Tanh", "Sigmoid"}
    | {"Exp", "Log", "Rsqrt", "Sqrt", "Square", "Pow", "Neg", "Maximum", "Minimum"}
    | {"SquaredDifference", "Relu", "Gelu", "Erf", "AddN", "Cast", "Equal", "Less"}
    | {"LogicalAnd", "LogicalOr", "LogicalNot", "NotEqual", "GreaterEqual", "Greater"}
    | {"LessEqual", "FloorDiv", "FloorMod", "BiasAdd", "_MklAdd", "_MklMul"}
    | {"_MklLayerNorm", "_FusedBatchNormEx", "Sin", "Cos"},
    "reductions": {"Sum", "Mean", "Max", "Min", "All", "Any", "Prod"},
    "shape and copies": {"Reshape", "Transpose", "ConcatV2", "Pack", "Unpack"}
    | {"Split", "SplitV", "StridedSlice", "Slice", "Tile", "ExpandDims", "Squeeze"}
    | {"Shape", "Fill", "ZerosLike", "OnesLike", "BroadcastTo", "Identity", "Range"}
    | {"_MklTranspose", "EnsureShape", "Const", "Size", "Rank", "BroadcastArgs"},
    "while loop (control flow)": {"Enter", "Exit", "Merge", "Switch", "NextIteration"}
    | {"LoopCond", "_SwitchN", "ControlTrigger", "NoOp"},
    "variables": {"ReadVariableOp", "VarHandleOp", "_Recv", "_Send"},
}


def category(op_type):
    if op_type.startswith(("String", "Unicode", "Regex", "LookupTable", "Ragged")):
        return "text (tokenize, look up, detokenize)"
    for name, types in CATEGORIES.items():
        if op_type in types:
            return name
    return "other"


class Served:
    """One SavedModel under the session loader: greedy and n-best by text batch."""

    def __init__(self, saved_model_dir, config=None):
        import tensorflow as tf

        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph, config=config)
        meta = tf.compat.v1.saved_model.loader.load(
            self.session, ["serve"], str(saved_model_dir)
        )
        self.signatures = {}
        for name, output in (
            ("serving_default", "translation"),
            ("translate_nbest", "translations"),
        ):
            signature = meta.signature_def[name]
            self.signatures[name] = (
                signature.inputs["text"].name,
                signature.outputs[output].name,
            )

    def run(self, name, batch, **kwargs):
        feed, fetch = self.signatures[name]
        return self.session.run(fetch, {feed: batch}, **kwargs)

    def texts(self, name, batches):
        return [
            value.decode("utf-8")
            for batch in batches
            for value in self.run(name, batch).reshape(-1)
        ]


def _pass(served, name, batches):
    def run():
        for batch in batches:
            served.run(name, batch)

    return run


def export_current(run_dir, base, options, quick=False):
    """The run exported as ``base/1``; ``quick``: `_bench.quick_export`."""
    from keras_selfattn import serving

    if quick:
        return _bench.quick_export(run_dir, **options)
    return serving.export_run(run_dir, base, 1, **options)


def compare(args, batches, current, baseline):
    """Texts of both, the interleaved timing: rows of the speed table."""
    rows = []
    names = ["serving_default"] + ([] if args.no_beam else ["translate_nbest"])
    for name in names:
        new, old = current.texts(name, batches), baseline.texts(name, batches)
        differ = sum(a != b for a, b in zip(new, old))
        steps = {"after": _pass(current, name, batches)}
        steps["before"] = _pass(baseline, name, batches)
        samples = _bench.interleaved(steps, args.rounds, warmup=1)
        sentences = sum(len(b) for b in batches)
        speed = {k: sentences / _bench.median(v) for k, v in samples.items()}
        ratio = 1 / _bench.paired_ratio(samples, "after", "before")
        rows.append(
            [
                f"{name} ({'greedy' if name == 'serving_default' else 'beam'})",
                f"{speed['before']:.0f}",
                f"{speed['after']:.0f}",
                f"**{ratio:.2f}**",
                f"{min(samples['before']) / min(samples['after']):.2f}",
                f"{differ} of {len(new)}",
            ]
        )
    return rows


def trace_pass(served, name, batches):
    """Op time per category (seconds) over one pass, and the pass's wall time."""
    import tensorflow as tf

    totals = collections.Counter()
    start = time.perf_counter()
    for batch in batches:
        metadata = tf.compat.v1.RunMetadata()
        options = tf.compat.v1.RunOptions(
            trace_level=tf.compat.v1.RunOptions.FULL_TRACE
        )
        served.run(name, batch, options=options, run_metadata=metadata)
        for device in metadata.step_stats.dev_stats:
            for node in device.node_stats:
                op_type = node.timeline_label.split("(")[0].split(" = ")[-1].strip()
                op_type = op_type or node.node_name.split(":")[0]
                totals[category(op_type)] += node.all_end_rel_micros * 1e-6
    return totals, time.perf_counter() - start


def matmul_flops_per_second(rounds=5, n=1024):
    import tensorflow as tf

    a = tf.random.normal([n, n])
    b = tf.random.normal([n, n])
    matmul = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    samples = _bench.interleaved({"m": lambda: matmul().numpy()}, rounds, 3)
    return 2 * n**3 / _bench.median(samples["m"]), 2 * n**3 / min(samples["m"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", help="a trained run directory")
    parser.add_argument("--test", help="the test TSV (source, target)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=(
            "a tiny run (trained here unless --run and --test are given), "
            "compared with its own export, one round"
        ),
    )
    parser.add_argument("--baseline", help="a SavedModel of the same run, before")
    parser.add_argument(
        "--export-option",
        action="append",
        default=[],
        help="NAME=VALUE passed to export_run (VALUE as Python literal)",
    )
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="first N sources")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-beam", action="store_true")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    if args.quick:
        args.batch, args.rounds, args.limit = 16, 1, 32
        if args.run and args.test:  # a quick run made already (the tests')
            report(args)
            return
        with tempfile.TemporaryDirectory() as scratch:
            args.run, args.test = _bench.quick_run(scratch)
            report(args)
        return
    if not (args.run and args.test):
        parser.error("give --run and --test, or --quick")
    report(args)


def _options(pairs):
    import ast

    options = {}
    for pair in pairs:
        name, value = pair.split("=", 1)
        options[name] = ast.literal_eval(value)
    return options


def report(args):
    from keras_selfattn.text import read_pairs

    sources = [s for s, _ in read_pairs(args.test)][: args.limit]
    batches = [sources[i : i + args.batch] for i in range(0, len(sources), args.batch)]
    with tempfile.TemporaryDirectory() as base:
        options = _options(args.export_option)
        exported = export_current(args.run, base, options, args.quick)
        current = Served(exported)
        if args.baseline or args.quick:  # --quick: the export against itself
            baseline = Served(args.baseline) if args.baseline else current
            rows = compare(args, batches, current, baseline)
            print()
            print(
                f"Served translator, session loader, {len(sources)} test sources in "
                f"batches of {args.batch}, sentences/s:"
            )
            print()
            _bench.print_table(
                [
                    "signature",
                    "before",
                    "after",
                    "after / before (median of rounds)",
                    "fastest before / fastest after",
                    "texts that differ",
                ],
                rows,
            )
        if args.profile:
            profile(args, batches, current)
    print()
    print(f"median of {args.rounds} interleaved rounds; {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, args.argv)}")


def profile(args, batches, served):
    """Prints the op-category table and the FLOP count against the matmul peak."""
    import json

    from keras_selfattn.inference import load_translator

    translator = load_translator(args.run)
    with open(os.path.join(args.run, "config.json")) as file:
        config = json.load(file)
    names = ["serving_default"] + ([] if args.no_beam else ["translate_nbest"])
    rows = []
    for name in names:
        _pass(served, name, batches)()  # warm
        totals, wall = trace_pass(served, name, batches)
        timed = _bench.interleaved({"pass": _pass(served, name, batches)}, 1, 1, 0)
        op_time = sum(totals.values())
        for cat, seconds in totals.most_common():
            rows.append(
                [name, cat, f"{seconds:.3f}", f"{100 * seconds / op_time:.1f}%"]
            )
        rows.append([name, "all ops (sum)", f"{op_time:.3f}", "100%"])
        rows.append([name, "wall, traced / untraced", f"{wall:.3f}", ""])
        rows[-1][3] = f"{timed['pass'][0]:.3f} s untraced"
    print()
    print("Where the time goes, one traced pass (op time summed over both cores):")
    print()
    _bench.print_table(["signature", "op category", "seconds", "share"], rows)
    flops_report(args, batches, served, translator, config)


def flops_report(args, batches, served, translator, config):
    """FLOPs per sentence (useful, and as run: every row until the batch's last),
    then `ceiling_report` for each signature."""
    model_config = config.get("model", config)
    vocab = translator.model.target_vocab_size
    useful = executed = 0.0
    plans = {
        "serving_default": search_plan(served, "serving_default", batches, translator)
    }
    for sources, steps, _ in plans["serving_default"]:
        for source_len, target_len in zip(sources, steps):
            useful += sentence_flops(model_config, vocab, source_len, target_len)
        executed += len(steps) * sentence_flops(
            model_config, vocab, sources.max(initial=1), steps.max()
        )
    sentences = sum(len(batch) for batch in batches)
    timed = _bench.interleaved({"pass": _pass(served, "serving_default", batches)}, 3)
    seconds = _bench.median(timed["pass"])
    peak, best_peak = matmul_flops_per_second()
    per_sentence, as_run = useful / sentences, executed / sentences
    rate = useful / seconds
    print()
    print(
        f"Greedy, batch {args.batch}: {per_sentence / 1e9:.4f} GFLOP per sentence "
        f"(its own lengths), {as_run / 1e9:.4f} GFLOP as run (padded to the batch's "
        f"longest source and target); {sentences / seconds:.0f} sentences/s = "
        f"{rate / 1e9:.1f} useful GFLOP/s, {executed / seconds / 1e9:.1f} as run; "
        f"1024^3 float32 matmul {peak / 1e9:.0f} GFLOP/s (best {best_peak / 1e9:.0f})"
        f": **{100 * rate / peak:.1f}%** of the matmul peak useful, "
        f"{100 * executed / seconds / peak:.1f}% as run; the peak allows "
        f"{peak / per_sentence:.0f} sentences/s."
    )
    if not args.no_beam:
        plans["translate_nbest"] = search_plan(
            served, "translate_nbest", batches, translator
        )
    for name, plan in plans.items():
        ceiling_report(name, batches, served, plan, model_config, vocab)


def search_plan(served, name, batches, translator):
    """Per batch: its sources' token counts, the steps each source's search took
    (its tokens and the end; beam: its longest hypothesis') and the decoder rows
    a source takes (1, or the beam's K)."""
    import numpy as np

    encode = translator.tokenizer.target.encode
    plan = []
    for batch in batches:
        ids = translator.encode_sources(batch)[0].numpy()
        out = served.run(name, batch).reshape(len(batch), -1)
        steps = [max(len(encode([text])[0]) + 1 for text in row) for row in out]
        plan.append(((ids != 0).sum(1), np.array(steps), out.shape[1]))
    return plan


def ceiling_report(name, batches, served, plan, config, vocab):
    """The model's products alone at the rows ``name`` computes (its
    `search_plan`), timed against the served pass: how much faster any graph
    with this arithmetic can be."""
    timed = _bench.interleaved(
        {
            "pass": _pass(served, name, batches),
            "products": products_alone(config, vocab, plan, chained=False),
            "chained": products_alone(config, vocab, plan, chained=True),
        },
        3,
    )
    seconds, alone, chain = (_bench.median(timed[k]) for k in timed)
    sentences = sum(len(batch) for batch in batches)
    print(
        f"{name}: the model's products alone at its rows (each source's encoder on "
        f"its own tokens, no padding, no other op; median of 3 rounds interleaved "
        f"with the served pass's {seconds:.3f} s): as they come "
        f"{alone:.3f} s, one after another {chain:.3f} s. So with the same "
        f"arithmetic the served pass can be at most **{seconds / alone:.2f}x** "
        f"faster ({sentences / alone:.0f} sentences/s), and a graph whose products "
        f"wait for each other at most **{seconds / chain:.2f}x** "
        f"({sentences / chain:.0f} sentences/s)."
    )


def encoder_products(config):
    """(K, N) of the encoder's products, per source token (the attention's own
    Q K^T and A V, 2 T^2 d a layer, are counted in `sentence_flops` only)."""
    d, ffn = config["num_hiddens"], config["ffn_hiddens"]
    return config["num_layers"] * [(d, 3 * d), (d, d), (d, ffn), (ffn, d)]


def step_products(config, vocab):
    """(K, N) of a decoder step's products, per row: one additive attention (its
    query; the scores and the context are counted in `sentence_flops` only), the
    recurrent layers, the attentional output, the deep output and the logits."""
    units, memory = config["decoder_units"], config["num_hiddens"]
    gates = {"gru": 3, "lstm": 4}[config["rnn_type"]]
    products = [(units, units)]
    for layer in range(config["decoder_layers"]):
        inputs = config["embedding_dim"] + memory if layer == 0 else units
        products += [(inputs, gates * units), (units, gates * units)]
    if config["attentional_output"]:
        products.append((units + memory, units))
    deep = config.get("deep_output_hiddens") or 0
    if deep:
        products += [(units, deep), (deep, units)]
    return products + [(units, vocab)]


def sentence_flops(config, vocab, source_len, target_len):
    """Multiply-adds x 2 of the model's products for one sentence (greedy)."""
    d, units = config["num_hiddens"], config["decoder_units"]
    s = float(source_len)
    encoder = s * sum(k * n for k, n in encoder_products(config))
    encoder += config["num_layers"] * 2 * s * s * d  # Q K^T and A V
    keys = s * d * units  # the memory's keys, once
    states = config["decoder_layers"] * (2 if config["rnn_type"] == "lstm" else 1)
    bridge = states * d * units  # the initial states from the memory
    step = sum(k * n for k, n in step_products(config, vocab))
    step += s * units + s * d  # the additive scores and the context
    return 2 * (encoder + keys + bridge + target_len * step)


def products_alone(config, vocab, plan, chained):
    """A callable that runs the model's products and nothing else, at the rows of
    ``plan`` (`search_plan`): each batch's encoder and the memory's keys on its
    sources' real tokens alone, then at step t the rows of the sources whose
    search is still running (1 a source, or the beam's K). Random float32
    operands of those shapes (variables, so nothing is folded at trace time).
    ``chained``: each product waits for the one before, as a search's steps
    wait for each other; else the executor runs them as they come, on both
    cores at once."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    operands = {}

    def operand(rows, cols):
        if (rows, cols) not in operands:
            value = rng.standard_normal((rows, cols)).astype("float32")
            operands[rows, cols] = tf.Variable(value)
        return operands[rows, cols]

    shapes = []  # (M, K, N) of every product, in order
    for sources, steps, width in plan:
        tokens = int(sources.sum())
        shapes += [(tokens, k, n) for k, n in encoder_products(config)]
        shapes.append((tokens, config["num_hiddens"], config["decoder_units"]))
        for t in range(int(steps.max())):
            rows = width * int((steps > t).sum())
            shapes += [(rows, k, n) for k, n in step_products(config, vocab)]
    pairs = [(operand(m, k), operand(k, n)) for m, k, n in shapes]

    @tf.function
    def run():
        used = []  # one element of each product, so that none is pruned
        for a, b in pairs:
            with tf.control_dependencies(used[-1:] if chained else []):
                used.append(tf.matmul(a, b)[0, 0])
        return tf.add_n(used)

    return lambda: run().numpy()


if __name__ == "__main__":
    main()
