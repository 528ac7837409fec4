"""MultiHeadSelfAttention time and peak memory from 128 to 8192 tokens.

Batch 1, width 256.

Run: .venv/bin/python benchmarks/attention_scaling.py [--quick] [--max-gib G]

For each length T (doubling from 128 to 8192): the forward pass (inference,
``training=False``) and the forward + backward pass (a scalar loss, gradients
with respect to the input and the weights), in ``tf.function`` without XLA, 8
heads, float32, no mask. Time: the median of a few calls after the first. Peak
memory: the rise of the process's peak resident memory during the first call
(Linux VmHWM, reset before each measurement through /proc/self/clear_refs), i.e.
everything the call allocates beyond the inputs and weights. (Below a few MiB
the figure is allocator noise: small blocks come from memory the process
already holds.)

The quadratic term shows in both: doubling T multiplies time and memory by
about 4 once the (B, heads, T, T) logits dominate. The table also gives the
memory in units of one float32 (B, heads, T, T) tensor (H * T^2 * 4 bytes), and
the script fits memory(T) = a + b T + c T^2 to the measured points to state the
longest sequence whose peak, plus the process's own memory, stays under 24 GiB.

This machine is shared: a length whose predicted peak (4x the previous one's)
exceeds --max-gib (default 6) is not run; its row says "skipped" and the fit
uses the lengths that ran.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192)
QUICK_LENGTHS = (32, 64)
WIDTH, HEADS, BATCH = 256, 8, 1
BUDGET_GIB = 24


def measure(layer, length, backward, calls):
    """(median seconds, peak bytes above the resident memory before the calls)."""
    import time

    import numpy as np
    import tensorflow as tf

    x = tf.constant(
        np.random.default_rng(0).normal(size=(BATCH, length, WIDTH)).astype("float32")
    )
    variables = layer.trainable_variables

    if backward:

        @tf.function
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_mean(tf.square(layer(x, training=True)))
            grads = tape.gradient(loss, [x, *variables])
            return tf.add_n([tf.reduce_sum(g) for g in grads])
    else:

        @tf.function
        def run(x):
            return tf.reduce_sum(layer(x, training=False))

    run.get_concrete_function(x)  # trace outside the measurement
    baseline = _bench.reset_peak_memory()
    run(
        x
    ).numpy()  # the first call: its peak is the measurement (later calls reuse memory)
    peak = _bench.peak_memory_bytes() - baseline
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        run(x).numpy()
        times.append(time.perf_counter() - start)
    return _bench.median(times), max(peak, 0)


def fit_max_length(points, budget_bytes):
    """Longest T with a + b T + c T^2 <= budget, least-squares fitted to (T, bytes)."""
    import numpy as np

    lengths = np.array([t for t, _ in points], "float64")
    memory = np.array([m for _, m in points], "float64")
    degree = min(2, len(points) - 1)
    coefficients = np.polyfit(lengths, memory, degree, w=1.0 / np.maximum(memory, 1.0))
    c, b, a = [0.0] * (2 - degree) + list(coefficients)
    if c <= 0:
        return None, (a, b, c)
    return int((-b + np.sqrt(b * b - 4 * c * (a - budget_bytes))) / (2 * c)), (a, b, c)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="two short lengths (smoke run)"
    )
    parser.add_argument(
        "--max-gib",
        type=float,
        default=6.0,
        help="skip a length whose predicted peak is above this (default 6 GiB)",
    )
    args = parser.parse_args(argv)
    lengths = QUICK_LENGTHS if args.quick else LENGTHS

    from keras_selfattn.layers import MultiHeadSelfAttention

    layer = MultiHeadSelfAttention(WIDTH, HEADS)
    layer.build((BATCH, None, WIDTH))
    gib = 2.0**30
    process_baseline = _bench.reset_peak_memory()  # TensorFlow's runtime, the weights
    rows, points = [], {"forward": [], "forward + backward": []}
    previous = {}
    for length in lengths:
        unit = HEADS * length * length * 4 * BATCH  # one float32 (B, H, T, T) tensor
        for mode, backward in (("forward", False), ("forward + backward", True)):
            predicted = 4 * previous[mode][1] if mode in previous else 0
            if predicted > args.max_gib * gib:
                rows.append(
                    [
                        length,
                        mode,
                        "skipped",
                        "",
                        f"> {args.max_gib:g} GiB predicted",
                        "",
                        "",
                    ]
                )
                continue
            calls = (
                1
                if args.quick
                else (5 if length <= 1024 else 3 if length <= 2048 else 1)
            )
            seconds, peak = measure(layer, length, backward, calls)
            growth_time = (
                f"{seconds / previous[mode][0]:.1f}x" if mode in previous else ""
            )
            growth_memory = (
                f"{peak / previous[mode][1]:.1f}x"
                if mode in previous and previous[mode][1]
                else ""
            )
            rows.append(
                [
                    length,
                    mode,
                    _bench.ms(seconds),
                    growth_time,
                    f"{peak / 2**20:.0f} MiB",
                    growth_memory,
                    f"{peak / unit:.1f}",
                ]
            )
            previous[mode] = (seconds, peak)
            points[mode].append((length, peak))

    print()
    print(
        f"MultiHeadSelfAttention, batch {BATCH}, width {WIDTH}, {HEADS} heads, "
        "float32, tf.function (no XLA):"
    )
    print()
    _bench.print_table(
        [
            "T",
            "pass",
            "ms",
            "time vs T/2",
            "peak memory",
            "memory vs T/2",
            "peak / one (B,H,T,T) f32 tensor",
        ],
        rows,
    )
    print()
    for mode, measured in points.items():
        # Fit on the lengths where the T^2 term dominates (the larger half).
        use = measured[len(measured) // 2 :] if len(measured) >= 4 else measured
        if len(use) < 2:
            continue
        longest, (a, b, c) = fit_max_length(use, BUDGET_GIB * gib - process_baseline)
        if longest is None:
            print(
                f"{mode}: memory does not grow quadratically over the measured "
                "lengths; no estimate"
            )
            continue
        print(
            f"{mode}: peak ~ {c * 1e6 / 2**20:.2f} MiB x (T/1000)^2 + "
            f"{b * 1e3 / 2**20:.1f} MiB x (T/1000) + {a / 2**20:.0f} MiB, i.e. "
            f"{c / (HEADS * 4 * BATCH):.1f} float32 (B, H, T, T) tensors alive at the "
            "peak -> the longest sequence whose peak plus this process's "
            f"{process_baseline / 2**20:.0f} MiB (TensorFlow, weights) stays under "
            f"{BUDGET_GIB} GiB at batch {BATCH}, width {WIDTH}: **T = {longest}**"
        )
    print()
    print(f"{_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
