"""Ours on a training-CPU budget: snapshots at given CPU-minutes, validations excluded.

    .venv/bin/python benchmarks/budget_run.py --out runs/small --budgets 15,30,60 \\
        --threads 1 -- --preset small --data train.en-de.tsv \\
        --valid-data val.en-de.tsv --test-data test_2016_flickr.en-de.tsv \\
        --train-steps 20000 --eval-every 500 --seed 1
    .venv/bin/python benchmarks/budget_run.py --out runs/small --score \\
        --test test_2016_flickr.en-de.tsv --beam 1,4
    .venv/bin/python benchmarks/budget_run.py --quick   # a tiny run, in seconds

Training: ``keras-selfattn train`` with the flags after ``--``, in this process,
with one more Keras callback. The callback counts two CPU times of the process
(``resource.getrusage``, user + system): all of it (``process_cpu_s``: what
``history.csv`` records, validations included) and the training alone
(``train_cpu_s``: from the start of ``model.fit``, minus the CPU spent
between the end of each period's last step and the end of that period's
callbacks, i.e. the validation, its translations, the best-model save, and
minus the snapshots' own saves). When
``train_cpu_s`` first passes a budget the current weights (not the best by
validation: the same rule as the peer's `keras_hub_peer.py`; with
``--ema-momentum`` their moving average, what such a run validates) are saved to
``OUT/budget-<minutes>.keras``; after the last budget training stops (the run
then ends as a stopped ``train`` does). ``OUT/budgets.json`` lists each
snapshot's step and both CPU times, ``OUT/cpu_log.csv`` both times every 100
steps with the training loss.

``--threads N`` sets TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS before
TensorFlow loads (the package has no option of its own) and checks they took.

``--score``: translates ``--test`` with each snapshot (greedy and/or beam; with
``--ema-momentum`` both the average and the last weights, whose figures are
those of the same run without the average; ``--weights average`` only the
first), writes
the hypotheses beside it and prints sacrebleu BLEU / chrF (cased, against the
raw references) in a markdown table; ``--tok-ref`` adds BLEU as the Multi30k
papers compute it (`shared/tools/paper_bleu.py`'s pipeline: lowercased, Moses
normalized and tokenized, against the dataset's tok references, in the language of
the file's suffix; it needs sacremoses, the ``peer`` extra).
"""

import argparse
import json
import os
import pathlib
import resource
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench  # paper_bleu


def process_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def append_log(path, step, train_cpu, now, logs):
    """A row of ``cpu_log.csv`` (Keras' loss: the running mean of the period)."""
    loss = float((logs or {}).get("loss", float("nan")))
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"{step},{train_cpu:.1f},{now:.1f},{loss:.4f}\n")


class BudgetSnapshots:
    """The callback of `budget_callback` (a Keras callback class is mixed in)."""

    def __init__(self, out, budgets, log_every):
        super().__init__()
        self.out, self.log_every = out, log_every
        self.excluded = self.setup = 0.0
        self.last_batch_cpu = None
        self.step = 0
        self.pending = sorted(budgets)
        self.rows = []
        self.log = out / "cpu_log.csv"
        self.log.write_text("step,train_cpu_s,process_cpu_s,loss\n")

    def on_train_begin(self, logs=None):
        # Setup (reading data, learning vocabularies, building) not counted.
        self.setup = self.excluded = process_cpu()

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        now = process_cpu()
        self.last_batch_cpu = now
        train_cpu = now - self.excluded
        if self.step % self.log_every == 0:
            append_log(self.log, self.step, train_cpu, now, logs)
        while self.pending and train_cpu >= self.pending[0] * 60:
            self._snapshot(self.pending.pop(0), train_cpu, now)
        if not self.pending:
            self._stop()

    def _stop(self):
        best = self.out / "run" / "model.keras"
        if not best.exists():  # no validation yet: `train` loads one at its end
            shutil.copyfile(self.out / self.rows[-1]["model"], best)
        self.model.stop_training = True

    def _snapshot(self, minutes, train_cpu, now):
        from keras_selfattn.training.moving_average import (
            keeps_moving_average,
            moving_average_in,
        )

        path = self.out / f"budget-{minutes:g}.keras"
        row = {"budget_cpu_min": minutes, "step": self.step, "model": path.name}
        if keeps_moving_average(self.model):
            # The weights the average is taken over: the same run without it.
            row["last_weights_model"] = f"budget-{minutes:g}.last-weights.keras"
            self.model.save(self.out / row["last_weights_model"])
        with moving_average_in(self.model) as model:  # --ema-momentum: the average
            model.save(path)
        self.excluded += process_cpu() - now
        self.rows.append(
            {
                **row,
                "train_cpu_s": round(train_cpu, 1),
                "process_cpu_s": round(now, 1),
                "with_validations_cpu_s": round(now - self.setup, 1),
                "excluded_cpu_s": round(self.excluded, 1),
            }
        )
        (self.out / "budgets.json").write_text(json.dumps(self.rows, indent=1))
        print(f"budget {minutes:g} CPU-min: {self.rows[-1]}", flush=True)

    def on_epoch_end(self, epoch, logs=None):
        # Last callback: everything since the period's last step was
        # validation (loss, translations, best-model save) and history.
        if self.last_batch_cpu is not None:
            self.excluded += process_cpu() - self.last_batch_cpu
            self.last_batch_cpu = None


def budget_callback(out, budgets, log_every=100):
    """The Keras callback described in the module docstring."""
    import keras

    callback = type("BudgetCallback", (BudgetSnapshots, keras.callbacks.Callback), {})
    return callback(out, budgets, log_every)


def set_threads(threads):
    os.environ["TF_NUM_INTRAOP_THREADS"] = str(threads)
    os.environ["TF_NUM_INTEROP_THREADS"] = str(threads)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    got = (
        tf.config.threading.get_intra_op_parallelism_threads(),
        tf.config.threading.get_inter_op_parallelism_threads(),
    )
    print(f"threads (intra, inter): {got}", flush=True)


def train(args):
    out = pathlib.Path(args.out)
    if args.threads:
        set_threads(args.threads)
    from keras_selfattn import cli

    parsed = cli.build_parser().parse_args(
        ["train", "--out", str(out / "run")] + args.rest
    )
    parsed.configure(parsed)
    out.mkdir(parents=True, exist_ok=True)
    from keras_selfattn.training import train as train_fn

    callback = budget_callback(out, [float(b) for b in args.budgets.split(",")])
    train_fn(
        parsed.data,
        parsed.out,
        parsed.model_config,
        parsed.train_config,
        verbose=2,
        callbacks=[callback],
        valid_data=parsed.valid_data,
        test_data=parsed.test_data,
        vocab=parsed.vocab,
        overwrite=parsed.overwrite,
    )
    print(json.dumps({"final_process_cpu_s": process_cpu()}), flush=True)


def score(args):
    import keras

    from keras_selfattn import text
    from keras_selfattn.inference import load_translator

    out = pathlib.Path(args.out)
    rows = json.loads((out / "budgets.json").read_text())
    pairs = text.read_pairs(args.test)
    sources = [s for s, _ in pairs]
    references = [r for _, r in pairs]
    if not (out / "run" / "model.keras").exists():
        # Stopped before its first validation: the run has no best model yet,
        # and `load_translator` wants one (the snapshots replace it below).
        shutil.copyfile(out / rows[0]["model"], out / "run" / "model.keras")
    translator = load_translator(out / "run")
    print(
        "| budget (train CPU-min) | step | process CPU-min | weights | search | BLEU "
        "| chrF | paper BLEU |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        if args.only and f"{row['budget_cpu_min']:g}" not in args.only.split(","):
            continue
        models = [("last", row["model"])]
        if "last_weights_model" in row:  # an --ema-momentum run: both
            models = [("average", row["model"]), ("last", row["last_weights_model"])]
            models = [m for m in models if args.weights in ("both", m[0])]
        for weights, model_file in models:
            translator.model = keras.saving.load_model(out / model_file)
            for beam in [int(b) for b in args.beam.split(",")]:
                bleu, chrf, paper = _score_translations(
                    translator, sources, references, beam, args, out / model_file
                )
                search = "greedy" if beam == 1 else f"beam {beam}"
                print(
                    f"| {row['budget_cpu_min']:g} | {row['step']:,} | "
                    f"{row['process_cpu_s'] / 60:.1f} | {weights} | {search} | "
                    f"{bleu:.1f} | {chrf:.1f} | {paper} |",
                    flush=True,
                )


def _score_translations(translator, sources, references, beam, args, model_path):
    """BLEU, chrF and (with ``--tok-ref``) paper BLEU of one model's translations,
    written beside ``model_path``."""
    from sacrebleu.metrics import BLEU, CHRF

    hyps = [t.text for t in translator.translate(sources, beam_size=beam)]
    name = f"{model_path}.{pathlib.Path(args.test).stem}.beam{beam}.hyp"
    pathlib.Path(name).write_text("\n".join(hyps) + "\n", encoding="utf-8")
    bleu = BLEU().corpus_score(hyps, [references]).score
    chrf = CHRF().corpus_score(hyps, [references]).score
    paper = f"{_bench.paper_bleu(hyps, args.tok_ref):.2f}" if args.tok_ref else ""
    return bleu, chrf, paper


# ``--quick``: a tiny model on the bundled dates, a snapshot at 0.01 CPU-minutes.
QUICK_FLAGS = [
    "--num-hiddens",
    "16",
    "--num-heads",
    "2",
    "--num-layers",
    "1",
    "--ffn-hiddens",
    "32",
    "--decoder-units",
    "16",
    "--embedding-dim",
    "8",
    "--epochs",
    "1",
    "--batch-size",
    "32",
    "--no-jit-compile",
    "--patience",
    "100",
    "--source-tokenizer",
    "word",
    "--target-tokenizer",
    "char",
    "--validation-translations",
    "0",
    "--best-by",
    "loss",
    "--no-tensorboard",
]


def quick(args, scratch):
    """Trains and scores the tiny run of ``--quick`` under ``scratch``."""
    from keras_selfattn import text

    pairs = text.load_bundled_dates()[:352]
    files = {}
    for name, part in (("train", pairs[:320]), ("test", pairs[320:])):
        files[name] = pathlib.Path(scratch) / f"{name}.tsv"
        files[name].write_text("".join(f"{s}\t{t}\n" for s, t in part), "utf-8")
    args.out, args.budgets = str(pathlib.Path(scratch) / "out"), "0.01"
    args.rest = ["--data", str(files["train"]), *QUICK_FLAGS]
    train(args)
    args.test, args.beam = str(files["test"]), "1,2"
    score(args)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out")
    parser.add_argument(
        "--quick", action="store_true", help="a tiny run trained and scored here"
    )
    parser.add_argument("--budgets", default="15,30,60", help="training CPU-minutes")
    parser.add_argument("--threads", type=int, default=0, help="0: TensorFlow's")
    parser.add_argument("--score", action="store_true")
    parser.add_argument("--test")
    parser.add_argument("--tok-ref")
    parser.add_argument("--beam", default="1,4")
    parser.add_argument("--only", help="score only these budgets, e.g. 15,60")
    parser.add_argument(
        "--weights",
        choices=["both", "average", "last"],
        default="both",
        help="an --ema-momentum run's snapshots to score (default: both)",
    )
    parser.add_argument("rest", nargs="*", help="`keras-selfattn train` flags")
    args = parser.parse_args(argv)
    if args.quick:
        with tempfile.TemporaryDirectory() as scratch:
            quick(args, scratch)
        print(f"command: {_bench.command_line(__file__, argv)}")
        return
    if not args.out:
        parser.error("give --out, or --quick")
    if args.score:
        if args.threads:
            set_threads(args.threads)
        score(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
