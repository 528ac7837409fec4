"""What goes wrong when many self-attention blocks are stacked: pre- vs post-layer-norm.

Run: .venv/bin/python benchmarks/deep_stacks.py [--depths 2 6 12]
         [--steps 150] [--quick] [--png PATH]

For every depth and both block types (`TransformerEncoderBlock(norm_first=...)`) the
script builds `build_seq2seq` with the demo's widths, trains it for ``--steps``
steps on the bundled dates corpus (same batches, same seed, Adam at a constant
learning rate with NO warm-up, no gradient clipping; ``--jit`` for XLA) and records the
training loss of every step and the gradient norm of every encoder block (the global
norm of that block's weight gradients). Post-layer-norm stacks are known to need a
learning-rate warm-up because their gradients near the output are large at
initialization (Xiong et al. 2020, "On Layer Normalization in the Transformer
Architecture"); pre-layer-norm stacks are not. Prints a markdown table and saves
the loss curves and per-block gradient norms as one PNG.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def make_batches(num_pairs, batch_size, seed):
    from keras_selfattn import text

    pairs = text.load_bundled_dates()[:num_pairs]
    tokenizer = text.PairTokenizer.build(
        pairs, text.DATES_SOURCE_CONFIG, text.DATES_TARGET_CONFIG
    )
    dataset = text.make_dataset(
        pairs,
        tokenizer,
        batch_size=batch_size,
        drop_remainder=True,
        seed=seed,
        max_source_length=16,
        max_target_length=12,
        pad_to_max_length=True,
    )
    return tokenizer, list(dataset.as_numpy_iterator())


def run(depth, norm_first, tokenizer, batches, steps, learning_rate, seed, jit=False):
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_selfattn.jobs import DEMO_MODEL_CONFIG
    from keras_selfattn.models import build_seq2seq, masked_loss

    keras.utils.set_random_seed(seed)
    model = build_seq2seq(
        tokenizer.source_vocab_size,
        tokenizer.target_vocab_size,
        DEMO_MODEL_CONFIG,
        seed=seed,
        num_layers=depth,
        norm_first=norm_first,
        dropout=0.0,
    )
    variables = model.trainable_variables
    block_of = []
    for variable in variables:
        head = variable.path.split("/")[0]
        block_of.append(
            int(head.rsplit("_", 1)[1]) if head.startswith("encoder_block_") else -1
        )
    loss_fn = masked_loss()
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build(variables)

    # Without XLA by default: at these step counts a 12-block XLA compile costs more
    # than it saves on a CPU.
    @tf.function(jit_compile=jit)
    def step(inputs, targets):
        with tf.GradientTape() as tape:
            loss = loss_fn(targets, model(inputs, training=True))
        grads = tape.gradient(loss, variables)
        norms = tf.stack(
            [
                tf.linalg.global_norm([g for g, b in zip(grads, block_of) if b == i])
                for i in range(depth)
            ]
        )
        optimizer.apply_gradients(zip(grads, variables))
        return loss, norms

    losses, norms = [], []
    for i in range(steps):
        inputs, targets = batches[i % len(batches)]
        loss, block_norms = step(inputs, targets)
        losses.append(float(loss))
        norms.append(np.asarray(block_norms))
    return np.array(losses), np.stack(norms)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depths", nargs="+", type=int, default=[2, 6, 12])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=6400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--png",
        default=None,
        help="default: benchmarks/deep_stacks.png (--quick: a temp file)",
    )
    parser.add_argument(
        "--jit", action="store_true", help="compile the train step with XLA"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: depths 2 and 6, 15 steps"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.depths, args.steps, args.pairs = [2, 6], 15, 1024
    if args.png is None:
        import tempfile

        args.png = (
            os.path.join(tempfile.mkdtemp(prefix="deep_stacks_"), "deep_stacks.png")
            if args.quick
            else "benchmarks/deep_stacks.png"
        )

    import numpy as np

    tokenizer, batches = make_batches(args.pairs, args.batch_size, args.seed)
    results = {}
    for depth in args.depths:
        for norm_first in (False, True):
            start = time.perf_counter()
            losses, norms = run(
                depth,
                norm_first,
                tokenizer,
                batches,
                args.steps,
                args.learning_rate,
                args.seed,
                args.jit,
            )
            results[depth, norm_first] = (losses, norms, time.perf_counter() - start)
            print(
                f"depth {depth} {'pre' if norm_first else 'post'}-LN: loss "
                f"{losses[0]:.3f} -> {losses[-1]:.3f}"
                f" ({results[depth, norm_first][2]:.0f} s)",
                flush=True,
            )

    tail = max(1, args.steps // 10)
    print()
    print(
        f"{args.steps} steps, batch {args.batch_size}, Adam lr {args.learning_rate:g} "
        f"constant (no warm-up, no clipping), dropout 0, seed {args.seed}. Gradient "
        "norms: global norm of each encoder block's weight gradients; 'first/last' is "
        "block 0 over the block next to the decoder."
    )
    print()
    print(
        "| blocks | layer norm | loss at step 1 | loss, mean of last 10% | min loss | "
        "grad norm at step 1, first/last block | mean grad norm over the run: first "
        "block | last block | first/last | time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (depth, norm_first), (losses, norms, wall) in results.items():
        mean = norms.mean(0)
        print(
            f"| {depth} | {'pre' if norm_first else 'post'} | {losses[0]:.3f} | "
            f"{np.mean(losses[-tail:]):.3f} | {np.nanmin(losses):.3f} | "
            f"{norms[0, 0] / norms[0, -1]:.2f} | {mean[0]:.4f} | {mean[-1]:.4f} | "
            f"{mean[0] / mean[-1]:.2f} | {wall:.0f} s |"
        )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_init, ax_mean) = plt.subplots(1, 3, figsize=(17, 4.8))
    colors = dict(
        zip(args.depths, plt.cm.viridis(np.linspace(0, 0.85, len(args.depths))))
    )
    for (depth, norm_first), (losses, norms, _) in results.items():
        style = {
            "color": colors[depth],
            "linestyle": "-" if norm_first else "--",
            "label": f"{depth} blocks, {'pre' if norm_first else 'post'}-LN",
        }
        ax_loss.plot(np.arange(1, len(losses) + 1), losses, **style)
        ax_init.plot(np.arange(depth), norms[0], marker="o", **style)
        ax_mean.plot(np.arange(depth), norms.mean(0), marker="o", **style)
    ax_loss.set(
        xlabel="step", ylabel="training loss", title="training loss (no warm-up)"
    )
    ax_init.set(
        xlabel="encoder block (0 = next to the embeddings)",
        ylabel="gradient norm",
        yscale="log",
        title="per-block gradient norm at step 1",
    )
    ax_mean.set(
        xlabel="encoder block",
        ylabel="gradient norm",
        yscale="log",
        title=f"per-block gradient norm, mean of {args.steps} steps",
    )
    ax_loss.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)
    fig.savefig(args.png, dpi=110)
    print(f"\nfigure: {args.png}")


if __name__ == "__main__":
    main()
