"""An XLA export's first requests with and without its warmup records replayed.

Run: .venv/bin/python benchmarks/xla_warmup.py --test TSV SAVED_MODEL [--batch 32]

An ``xla=True`` export compiles its searches per batch size, source bucket and
stage on first use; TF Serving replays ``assets.extra/tf_serving_warmup_requests``
at load, before the version serves. Each case runs in a fresh process (XLA's
compilation cache lives in the process): the SavedModel loaded under the session
loader, as TF Serving loads it; then, for "replayed", every warmup record that
takes ``text``, timed as the load's warmup; then each text signature translates
the test sources in batches, twice. The first pass pays for whatever the warmup
did not compile; the second is the steady state.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

SIGNATURES = ("serving_default", "translate_nbest")


def measure(saved_model_dir, test, batch, replay):
    """{"warmup": s, signature: [first pass s, second pass s]} in this process."""
    import served_translator
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's text ops)

    from keras_selfattn.serving import read_warmup_requests
    from keras_selfattn.text import read_pairs

    sources = [source for source, _ in read_pairs(test)]
    batches = [sources[i : i + batch] for i in range(0, len(sources), batch)]
    served = served_translator.Served(saved_model_dir)
    start = time.perf_counter()
    if replay:
        for log in read_warmup_requests(saved_model_dir):
            request = log.predict_log.request
            if "text" in request.inputs:
                texts = tf.make_ndarray(request.inputs["text"]).tolist()
                served.run(request.model_spec.signature_name, texts)
    times = {"warmup": time.perf_counter() - start}
    for name in SIGNATURES:
        times[name] = []
        for _ in range(2):
            start = time.perf_counter()
            for texts in batches:
                served.run(name, texts)
            times[name].append(time.perf_counter() - start)
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("saved_model", help="the export's version folder, BASE/N")
    parser.add_argument("--test", required=True, help="the test TSV (source, target)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--child", choices=("replayed", "not"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        times = measure(
            args.saved_model, args.test, args.batch, args.child == "replayed"
        )
        print(json.dumps(times))
        return
    rows = []
    for case in ("replayed", "not"):
        done = subprocess.run(
            [
                sys.executable,
                os.path.abspath(__file__),
                args.saved_model,
                "--test",
                args.test,
                "--batch",
                str(args.batch),
                "--child",
                case,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        times = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(
            [
                "warmup records replayed" if case == "replayed" else "no warmup",
                f"{times['warmup']:.1f} s" if case == "replayed" else "-",
                *(f"{times[name][i]:.1f} s" for name in SIGNATURES for i in (0, 1)),
            ]
        )
    print()
    _bench.print_table(
        [
            "load",
            "warmup at load",
            "greedy, first pass",
            "greedy, second pass",
            "beam, first pass",
            "beam, second pass",
        ],
        rows,
    )
    print()
    print(
        f"one fresh process each, batches of {args.batch}; {_bench.environment_line()}"
    )
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
