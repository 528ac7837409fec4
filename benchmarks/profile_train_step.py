"""Where the demo model's training step spends its time: the TF profiler, summarized.

Run: .venv/bin/python benchmarks/profile_train_step.py [--no-xla]
         [--dropout R] [--top N] [--quick] [--preset small]

Builds the demo model (``DEMO_MODEL_CONFIG``, batch 64, source 13 and target 11
tokens, the demo's vocabulary sizes), or with ``--preset small`` that preset's
model and optimizer as `small_step_cost.py` builds them (4,077 / 3,715 pieces,
batch 64, source 16 and target 17 tokens; ``--no-xla`` is then how the preset
trains on CPUs), runs a few ``train_on_batch`` steps under
``tf.profiler.experimental`` and reads the trace (the XSpace protobuf the
profiler writes) directly, without TensorBoard: the exclusive time of every op
(graph mode) or XLA thunk (``jit_compile=True``; a thunk that runs others counts
only its own time), summed over all threads and averaged per step, grouped into
categories (matrix products, random numbers for dropout, element-wise fusions,
copies) and listed by name. Thread time, not wall time: two threads working at
once count twice, and the executors' own overhead between ops is not in it.
"""

import argparse
import collections
import glob
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

CATEGORIES = (
    (
        "random numbers (dropout)",
        r"^call(\.\d+)?$|concatenate_bitcast|bitcast_concatenate|Random|Philox|rng",
    ),
    ("matrix products", r"MatMul|dot|Einsum|gemm|Conv"),
    ("copies and transposes", r"copy|[Tt]ranspose"),
    (
        "element-wise and reductions",
        r"fusion|Tanh|Add|Mul|Sigmoid|Softmax|Select|Sum|Sub|Exp|Max|Cast|Sqrt|Rsqrt",
    ),
)
_BOOKKEEPING = (
    "ThunkExecutor",
    "BlockUntil",
    "Eager",
    "TFE_",
    "one_step",
    "CpuExecutable",
    "__inference",
    "ExecutorState",
    "KernelAndDevice",
    "FunctionRun",
    "ThreadpoolListener",
    "ParallelFor",
    "ValidateInput",
    "train_function",
)


def op_times(fn, steps):
    """{op or thunk name: exclusive thread-ms per step}, traced over ``steps`` calls."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tempfile.mkdtemp(prefix="profile_train_step_")
    try:
        tf.profiler.experimental.start(logdir)
        for _ in range(steps):
            fn()
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(
            glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0],
            "rb",
        ) as handle:
            space.ParseFromString(handle.read())
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    times = collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            if line.name == "python" or line.name.startswith("TraceMe"):
                continue
            events = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))
            exclusive = _exclusive_durations(events)
            for index, event in enumerate(events):
                name = plane.event_metadata[event.metadata_id].name
                if not name.startswith(_BOOKKEEPING):
                    times[name] += max(exclusive[index], 0) / 1e9 / steps
    return times


def _exclusive_durations(events):
    """{index: exclusive picoseconds} of events sorted by start (longest first).

    Events nest on a line (an XLA call contains the thunks it runs): each one's
    exclusive time is its duration less that of the events inside it.
    """
    exclusive, stack = {}, []
    for index, event in enumerate(events):
        while (
            stack
            and events[stack[-1]].offset_ps + events[stack[-1]].duration_ps
            <= event.offset_ps
        ):
            stack.pop()
        if stack:
            exclusive[stack[-1]] -= event.duration_ps  # the parent loses this span
        exclusive[index] = event.duration_ps
        stack.append(index)
    return exclusive


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--no-xla", dest="xla", action="store_false", help="graph mode without XLA"
    )
    parser.add_argument(
        "--dropout", type=float, default=None, help="override the demo's dropout (0.1)"
    )
    parser.add_argument("--top", type=int, default=15, help="ops listed by name")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument(
        "--quick", action="store_true", help="tiny model, 2 steps (smoke run)"
    )
    parser.add_argument(
        "--preset", choices=["small"], help="that preset's model, not the demo's"
    )
    args = parser.parse_args(argv)
    if args.preset:
        return profile_preset(args)

    from decoder_train_step import seq2seq_step

    from keras_selfattn.jobs import DEMO_MODEL_CONFIG
    from keras_selfattn.models import ModelConfig

    config = DEMO_MODEL_CONFIG
    shape = (64, 13, 11, 190, 15)
    steps = args.steps
    if args.quick:
        config = _bench.tiny_model_config()
        shape, steps = (4, 6, 5, 20, 12), 2
    if args.dropout is not None:
        config = ModelConfig(**{**vars(config), "dropout": args.dropout})
    step, _ = seq2seq_step(config, *shape, jit_compile=args.xla)
    title = (
        f"Demo model train step ({'XLA' if args.xla else 'graph mode, no XLA'}, "
        f"dropout {config.dropout}, batch {shape[0]}, source {shape[1]}, target "
        f"{shape[2]})"
    )
    report(step, steps, title, args, argv)


def profile_preset(args):
    """The ``--preset small`` step (small_step_cost.py's model and batch)."""
    import small_step_cost

    fields = {"train.jit_compile": args.xla}
    if args.dropout is not None:
        fields["dropout"] = args.dropout
    sizes = (4077, 3715)
    if args.quick:
        sizes, args.steps = (50, 40), 2
    model = small_step_cost.build(sizes, fields, args.quick)
    x, y = small_step_cost.batch(sizes)  # 16 source, 17 target tokens
    title = (
        f"`--preset small` train step ({'XLA' if args.xla else 'graph mode, no XLA'}"
        f", dropout {model.model_config.dropout}, "
        f"batch 64, source 16, target 17, vocabularies {sizes[0]:,} / {sizes[1]:,})"
    )
    report(lambda: model.train_on_batch(x, y), args.steps, title, args, None)


def report(step, steps, title, args, argv):
    """Profiles ``steps`` calls of ``step`` (after two warm-up calls) and prints."""
    step()
    step()
    times = op_times(step, steps)
    total = sum(times.values())
    by_category = collections.Counter()
    for name, ms in times.items():
        for category, pattern in CATEGORIES:
            if re.search(pattern, name):
                by_category[category] += ms
                break
        else:
            by_category["other"] += ms

    print()
    print(f"{title}, thread time per step by category:")
    print()
    _bench.print_table(
        ["category", "thread ms / step", "share"],
        [
            [c, f"{ms:.2f}", f"{100 * ms / total:.0f}%"]
            for c, ms in by_category.most_common()
        ],
    )
    print()
    print(f"The {args.top} longest ops / thunks:")
    print()
    _bench.print_table(
        ["op or XLA thunk", "thread ms / step", "share"],
        [
            [f"`{name[-90:]}`", f"{ms:.2f}", f"{100 * ms / total:.1f}%"]
            for name, ms in times.most_common(args.top)
        ],
    )
    print()
    print(f"{steps} profiled steps; {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
