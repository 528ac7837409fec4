"""A real corpus, end to end: train a preset on a CPU budget, score, export, serve.

Run (paths to your own TSV files; nothing is downloaded):

    .venv/bin/python benchmarks/real_corpus.py --train train.en-de.tsv \\
        --valid val.en-de.tsv --test test_2016_flickr.en-de.tsv \\
        --out runs/m30k-small --preset small --cpu-minutes 60 --report-at 15,60 \\
        --peer "OpenNMT-tf Transformer, 2,000 steps=41,4.5,23.9,129"

1. Trains ``keras-selfattn train --preset P`` in a subprocess and stops it (SIGTERM:
   the run keeps its best model and can be resumed) once the process has used
   ``--cpu-minutes`` of CPU time (user + system, read from /proc: Linux). After
   every validation the best model so far is copied to ``OUT.snaps/model-<row>.keras``
   (``row``: the history.csv row), so the figures at each ``--report-at`` budget
   are those of the best model at the last validation within it.
   ``--run RUN_DIR`` skips training and reads an existing run and its snapshots.
2. Scores each reported model on ``--test`` with sacrebleu (cased, detokenized
   output against the references as written): greedy, and beam 4 for the last.
3. Exports the last model (`keras_selfattn.serving.export_run`) and translates the
   test sources through the session-based loader TF Serving uses, in batches of
   32, greedy: served sentences per second (median of 3 passes).
4. Prints a markdown table, with the peer's figures given by ``--peer`` (measured
   on the same machine; ``NAME=CPU_MINUTES,BLEU,CHRF,SENTENCES_PER_S``) beside ours.
"""

import argparse
import csv
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench  # noqa: F401  (quiet TensorFlow)

from keras_selfattn.run_directory.layout import RunLayout

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU seconds of a running process (Linux /proc)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def history_rows(run_dir):
    path = RunLayout(run_dir).history
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def train(args):
    """Trains the preset until it ends or the CPU budget is spent; snapshots."""
    snaps = pathlib.Path(f"{args.out}.snaps")
    snaps.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "keras_selfattn",
        "train",
        "--preset",
        args.preset,
        *("--data", args.train, "--valid-data", args.valid, "--test-data", args.test),
        *("--out", args.out, "--seed", str(args.seed)),
        *("--train-steps", str(args.train_steps), "--eval-every", str(args.eval_every)),
        *args.train_args,
    ]
    print("$", " ".join(command), flush=True)
    process = subprocess.Popen(command)
    seen = 0
    while process.poll() is None:
        time.sleep(5)
        rows = history_rows(args.out)
        if len(rows) > seen:
            seen = len(rows)
            model = RunLayout(args.out).model
            if model.exists():
                shutil.copyfile(model, snaps / f"model-{seen}.keras")
        try:
            used = cpu_seconds(process.pid)
        except FileNotFoundError:
            break
        if used > args.cpu_minutes * 60:
            print(f"CPU budget spent ({used / 60:.1f} CPU-min): stopping", flush=True)
            process.send_signal(signal.SIGTERM)
            process.wait()
    return snaps


def reported_models(run_dir, snaps, budgets):
    """(budget in CPU-min, history row, snapshot) for each budget reached."""
    validations = [  # (history row number, row) of the periods that validated
        (number, row)
        for number, row in enumerate(history_rows(run_dir), start=1)
        if row.get("cpu_seconds") not in ("", "nan")
    ]
    chosen = []
    for budget in budgets:
        within = [
            (number, row)
            for number, row in validations
            if float(row["cpu_seconds"]) <= budget * 60
        ]
        if not within:
            continue
        number, row = within[-1]
        snapshot = pathlib.Path(snaps) / f"model-{number}.keras"
        if snapshot.exists():
            chosen.append((budget, row, snapshot))
    return chosen


def translator_with(run_dir, model_path):
    """A `Translator` of ``run_dir`` with the model at ``model_path``."""
    import keras

    from keras_selfattn.inference import Translator

    translator = Translator.load(run_dir)
    translator.model = keras.saving.load_model(model_path)
    return translator


def served_sentences_per_second(translator, sources):
    """Export, load under the session-based loader, translate in batches of 32."""
    import tensorflow as tf

    from keras_selfattn import serving

    with tempfile.TemporaryDirectory() as base:
        version = serving.export_translator(
            translator, base, 1, warmup_texts=sources[:8]
        )
        graph = tf.Graph()
        with tf.compat.v1.Session(graph=graph) as session:
            meta = tf.compat.v1.saved_model.loader.load(
                session, ["serve"], str(version)
            )
            signature = meta.signature_def["serving_default"]
            feed = signature.inputs["text"].name
            fetch = signature.outputs["translation"].name
            batches = [sources[i : i + 32] for i in range(0, len(sources), 32)]
            session.run(fetch, {feed: batches[0]})  # warm-up
            passes = []
            for _ in range(3):
                start = time.perf_counter()
                for batch in batches:
                    session.run(fetch, {feed: batch})
                passes.append(len(sources) / (time.perf_counter() - start))
    return statistics.median(passes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--valid", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--out", required=True, help="the run directory")
    parser.add_argument("--run", help="an existing run directory: skip training")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--cpu-minutes", type=float, default=60)
    parser.add_argument("--report-at", default="15,60", help="CPU-minute budgets")
    parser.add_argument("--train-steps", type=int, default=100_000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--peer", action="append", default=[])
    parser.add_argument("train_args", nargs="*", help="more `train` flags, after --")
    args = parser.parse_args(argv)
    if args.run:
        args.out = args.run
        snaps = pathlib.Path(f"{args.run}.snaps")
    else:
        snaps = train(args)

    from keras_selfattn import text
    from keras_selfattn.inference import evaluate

    test = text.read_pairs(args.test)
    budgets = [float(b) for b in args.report_at.split(",")]
    lines = [
        "| model | CPU-min | steps | BLEU | chrF | search | served sentences/s |",
        "|---|---|---|---|---|---|---|",
    ]
    chosen = reported_models(args.out, snaps, budgets)
    for index, (budget, row, snapshot) in enumerate(chosen):
        translator = translator_with(args.out, snapshot)
        searches = [1, 4] if index == len(chosen) - 1 else [1]
        for beam in searches:
            metrics = evaluate(translator, test, beam_size=beam, data=args.test)
            lines.append(
                f"| keras_selfattn --preset {args.preset} (best by chrF at "
                f"{float(row['cpu_seconds']) / 60:.0f} CPU-min) | <= {budget:g} | "
                f"{(int(row['epoch']) + 1) * args.eval_every} | "
                f"{metrics['bleu']:.1f} | {metrics['chrf']:.1f} | "
                f"{'greedy' if beam == 1 else f'beam {beam}'} | |"
            )
    if chosen:
        translator = translator_with(args.out, chosen[-1][2])
        speed = served_sentences_per_second(translator, [s for s, _ in test])
        lines[-1] = lines[-1][: -len("|")] + f" {speed:.0f} (greedy, batch 32) |"
    for peer in args.peer:
        name, values = peer.rsplit("=", 1)
        minutes, bleu, chrf, speed = values.split(",")
        lines.append(f"| {name} | {minutes} | | {bleu} | {chrf} | greedy | {speed} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
