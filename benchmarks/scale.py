"""Time to first step, time for N steps, peak memory, padding: 300k and 3M pairs.

Runs each measurement in its own process (so the peak resident memory is that
run's): for every corpus, ``build-vocab`` (new code), then ``train`` of the new
code with ``--vocab``, then ``train`` of the code before the streaming change
(a checkout of that code given by ``--old``). Each training process stops
itself after ``--warmup + --steps`` steps and reports:

- first step: seconds from the start of the process to the end of the first
  training step (reading, splitting, vocabularies, pipeline, tracing, XLA);
- N steps: seconds for ``--steps`` steps after ``--warmup`` steps (every length
  bucket compiled by then);
- peak RSS: the process's peak resident memory (``ru_maxrss``);
- real tokens: the share of real (non-padding) positions in the training batches
  (source and target), and the real target tokens per second over the N steps.

Make the corpora with ``benchmarks/make_big_corpus.py``; then::

    git worktree add /tmp/old REV
    python benchmarks/scale.py --old /tmp/old --corpus 300k=/tmp/big/300k.tsv \\
        --corpus 3M=/tmp/big/3m.tsv --steps 100
    python benchmarks/scale.py --quick   # 3,000 generated pairs, 3 steps, tiny model
"""

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

START = time.time()
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench


def bench_configs(quick=False):
    from keras_selfattn.models import ModelConfig
    from keras_selfattn.training import TrainConfig

    model = ModelConfig(
        num_hiddens=64,
        num_heads=4,
        num_layers=2,
        ffn_hiddens=128,
        dropout=0.1,
        decoder_units=128,
        embedding_dim=32,
        max_source_len=64,
        max_target_len=64,
    )
    train = {
        "batch_size": 64,
        "seed": 0,
        "source_tokenizer": "word",
        "target_tokenizer": "word",
        "warmup_steps": 100,
    }
    if quick:  # the tiny model, no XLA: the script end to end in seconds
        model = ModelConfig(**{**vars(model), **_bench.TINY_MODEL})
        train["jit_compile"] = False
    return model, TrainConfig, train


def peak_rss_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def stopper(total_steps, warmup, extra):
    import keras

    class Stop(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.steps = 0
            self.first = self.mark = None

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1
            now = time.time()
            if self.steps == 1:
                self.first = now - START
            if self.steps == warmup:
                self.mark = now
            if self.steps == total_steps:
                result = {
                    "total_s": now - START,
                    "first_step_s": self.first,
                    "steps_s": now - self.mark,
                    "peak_rss_gib": peak_rss_gib(),
                    **extra(),
                }
                print("RESULT " + json.dumps(result), flush=True)
                os._exit(0)

    return Stop()


def share_of(dataset, batches=100):
    """(real share of positions, mean real target tokens per batch)."""
    real = total = target = 0
    for inputs, target_out in dataset.take(batches).as_numpy_iterator():
        for array in (inputs["source"], target_out):
            real += int((array != 0).sum())
            total += array.size
        target += int((target_out != 0).sum())
    return real / total, target / batches


def child_new(args):
    from keras_selfattn import text
    from keras_selfattn.training import train
    from keras_selfattn.training.data import run_batches, run_data

    model, TrainConfig, values = bench_configs(args.quick)
    config = TrainConfig(**values, train_steps=10**6, eval_every=10**6)
    run_dir = pathlib.Path(args.work) / "run"
    measured = {}

    def extra():
        # Batches of the same pipeline (the run directory's data record, no rescan).
        data = run_data.prepare_run_data(args.data, run_dir, config)
        tokenizer = text.PairTokenizer.load(run_dir)
        stream = run_batches.training_stream(
            data, tokenizer, model, config, counters=text.stream.StreamCounters.create()
        )
        share, per_batch = share_of(stream, 10 if args.quick else 100)
        measured.update(real_share=share, target_tokens_per_step=per_batch)
        return measured

    train(
        args.data,
        run_dir,
        model,
        config,
        verbose=0,
        vocab=args.vocab,
        callbacks=[stopper(args.warmup + args.steps, args.warmup, extra)],
    )


def child_old(args):
    import importlib

    from keras_selfattn import text

    train_module = importlib.import_module("keras_selfattn.training.fit.train")
    run_tokenizer = importlib.import_module(
        "keras_selfattn.training.data.run_tokenizer"
    )
    train = train_module.train

    model, TrainConfig, values = bench_configs()
    config = TrainConfig(**values, epochs=1)
    sample = text.read_pairs(args.data, max_pairs=50_000)
    splits = text.split_pairs(sample, config.split, seed=config.seed)
    tokenizer = text.PairTokenizer.build(
        splits.train, *run_tokenizer.tokenizer_configs(config)
    )
    old = train_module.make_training_datasets(splits, tokenizer, model, config)[0]
    share, per_batch = share_of(old)
    train(
        args.data,
        pathlib.Path(args.work) / "run",
        model,
        config,
        verbose=0,
        callbacks=[
            stopper(
                args.warmup + args.steps,
                args.warmup,
                lambda: {"real_share": share, "target_tokens_per_step": per_batch},
            )
        ],
    )


def child_vocab(args):
    from keras_selfattn.jobs import build_vocab

    _, TrainConfig, values = bench_configs(args.quick)
    config = TrainConfig(
        **{k: v for k, v in values.items() if k in TrainConfig.VOCAB_FIELDS}
    )
    build_vocab(args.data, args.vocab, config, verbose=False)
    print(
        "RESULT "
        + json.dumps({"seconds": time.time() - START, "peak_rss_gib": peak_rss_gib()}),
        flush=True,
    )


def run_child(mode, code, data, work, vocab, args, timeout=None):
    env = {**os.environ, "PYTHONPATH": str(code), "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [
        str(pathlib.Path(__file__).resolve()),
        "--child",
        mode,
        "--data",
        str(data),
        "--work",
        str(work),
        "--vocab",
        str(vocab),
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
    ] + (["--quick"] if args.quick else [])
    try:
        done = _bench.run_python(
            command,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            cwd=code,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"timeout_s": timeout}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"{mode} on {data} failed:\n{done.stderr[-3000:]}")


def quick_corpus(work):
    """``--quick``: 3,000 pairs of `make_big_corpus.py` in ``work``."""
    import make_big_corpus  # beside this script, on sys.path since _bench's import

    return make_big_corpus.write_corpus(pathlib.Path(work) / "3k.tsv", 3000)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="3,000 generated pairs, 3 steps, a tiny model without XLA",
    )
    parser.add_argument("--old", help="checkout of the code before the change")
    parser.add_argument("--corpus", action="append", default=[], help="NAME=FILE")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument(
        "--old-timeout",
        type=float,
        help="stop the code before the change after this many seconds (reported)",
    )
    parser.add_argument(
        "--old-for",
        action="append",
        help="run the code before the change on this corpus NAME only (repeatable; "
        "default: every corpus)",
    )
    parser.add_argument("--child", choices=("new", "old", "vocab"))
    parser.add_argument("--data")
    parser.add_argument("--work")
    parser.add_argument("--vocab")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    if args.child:
        {"new": child_new, "old": child_old, "vocab": child_vocab}[args.child](args)
        return
    if args.quick:
        with tempfile.TemporaryDirectory() as work:
            args.corpus, args.old = [f"3k={quick_corpus(work)}"], None
            args.steps, args.warmup = 3, 1
            report(args)
        return
    report(args)


def report(args):
    rows = []
    for spec in args.corpus:
        name, path = spec.split("=", 1)
        with tempfile.TemporaryDirectory() as work:
            vocab = pathlib.Path(work) / "vocab"
            built = run_child(
                "vocab", REPO, path, pathlib.Path(work) / "v", vocab, args
            )
            print(f"{name} build-vocab: {json.dumps(built)}", flush=True)
            new = run_child("new", REPO, path, pathlib.Path(work) / "n", vocab, args)
            print(f"{name} new: {json.dumps(new)}", flush=True)
            old = None
            if args.old and (not args.old_for or name in args.old_for):
                try:
                    old = run_child(
                        "old",
                        args.old,
                        path,
                        pathlib.Path(work) / "o",
                        vocab,
                        args,
                        timeout=args.old_timeout,
                    )
                except RuntimeError as error:  # reported; the other corpora still run
                    print(f"{name} old: FAILED {error}", flush=True)
                print(f"{name} old: {json.dumps(old)}", flush=True)
            rows.append((name, built, new, old))
    print()
    print(
        f"| corpus | code | first step (s) | {args.steps} steps (s) | peak RSS (GiB) "
        "| real tokens | target tokens/s |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, built, new, old in rows:
        for label, result in (("before", old), ("after, --vocab", new)):
            if result is None:
                continue
            if "timeout_s" in result:
                print(
                    f"| {name} | {label} | no first step within "
                    f"{result['timeout_s']:.0f} s (stopped) | | | | |"
                )
                continue
            speed = result["target_tokens_per_step"] * args.steps / result["steps_s"]
            print(
                f"| {name} | {label} | {result['first_step_s']:.0f} | "
                f"{result['steps_s']:.1f} | {result['peak_rss_gib']:.2f} | "
                f"{result['real_share']:.0%} | {speed:,.0f} |"
            )
        print(
            f"| {name} | build-vocab | {built['seconds']:.0f} (whole command) | | "
            f"{built['peak_rss_gib']:.2f} | | |"
        )

    # The targets: the largest corpus against the smallest, after.
    if len(rows) > 1:
        small, large = rows[0], rows[-1]
        wall = large[2]["total_s"] / small[2]["total_s"]
        memory = large[2]["peak_rss_gib"] / small[2]["peak_rss_gib"]
        print(
            f"\n{large[0]} / {small[0]}, after, --vocab: {wall:.2f}x the wall time "
            f"(start to step {args.warmup + args.steps}), {memory:.2f}x the peak memory"
        )
    print(f"\ncommand: .venv/bin/python benchmarks/scale.py {' '.join(args.argv)}")


if __name__ == "__main__":
    main()
