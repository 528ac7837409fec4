"""The ``keras-selfattn`` command: a thin argparse layer over the library.

Every subcommand calls one documented function (`workflows.run_demo`,
`training.train`, `inference.evaluate`, `inference.Translator.translate`,
`serving.export_run`, `serving.check_serving`).
User errors (missing files, malformed TSV lines, bad options) print one line
``keras-selfattn: error: ...`` and exit with status 2, without a traceback.
"""

import argparse
import dataclasses
import json
import os
import sys
import typing

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_selfattn.models.config import ModelConfig


def _add_config_arguments(parser, cls, title, skip=()):
    """One ``--flag`` per field of the dataclass ``cls`` (``foo_bar`` -> ``--foo-bar``).

    Every flag defaults to None, meaning "the dataclass default"; booleans get
    ``--x/--no-x``; an optional field (``int | None``) parses as its non-None type;
    a field listed in ``cls.CHOICES`` accepts only those values.
    """
    defaults = cls()
    group = parser.add_argument_group(title)
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        flag = "--" + field.name.replace("_", "-")
        default = getattr(defaults, field.name)
        if isinstance(default, bool):
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=None
            )
            continue
        if default is None:
            kind = next(t for t in typing.get_args(field.type) if t is not type(None))
        else:
            kind = type(default)
        choices = cls.CHOICES.get(field.name)
        if choices:
            group.add_argument(flag, type=kind, default=None, choices=choices)
        else:
            group.add_argument(
                flag, type=kind, default=None, metavar=field.name.upper()
            )


def _config_from_args(cls, args, base=None):
    base = base or cls()
    values = vars(base).copy()
    for field in dataclasses.fields(cls):
        value = getattr(args, field.name, None)
        if value is not None:
            values[field.name] = value
    return cls(**values)


def build_parser():
    from keras_selfattn.training.config import TrainConfig

    parser = argparse.ArgumentParser(
        prog="keras-selfattn",
        description="Attention seq2seq with Keras 3: train, evaluate, translate, export for TF Serving.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo", help="the main job: train on the bundled dates corpus, evaluate, plot"
    )
    demo.add_argument(
        "--out", default="runs/demo", help="run directory (default: runs/demo)"
    )
    demo.add_argument(
        "--epochs", type=int, default=None, help="override the demo's epoch count"
    )

    build_vocab = sub.add_parser(
        "build-vocab",
        help="learn the vocabularies from pair files, in bounded memory",
    )
    build_vocab.add_argument(
        "--data",
        action="append",
        required=True,
        help="pair file or glob pattern (.gz read); repeat for more",
    )
    build_vocab.add_argument(
        "--out", required=True, help="directory for the vocabularies + tokenizer.json"
    )
    build_vocab.add_argument(
        "--overwrite", action="store_true", help="replace vocabularies in --out"
    )
    _add_config_arguments(
        build_vocab,
        TrainConfig,
        "tokenizer",
        skip=[
            f.name
            for f in dataclasses.fields(TrainConfig)
            if f.name not in TrainConfig.VOCAB_FIELDS
        ],
    )

    train = sub.add_parser("train", help="train on source<TAB>target pair files")
    train.add_argument(
        "--data",
        action="append",
        required=True,
        help="pair file or glob pattern (shards/*.tsv.gz), streamed; repeat for more",
    )
    train.add_argument(
        "--valid-data",
        action="append",
        default=None,
        help="validation pair file(s) (default: held out of --data)",
    )
    train.add_argument(
        "--test-data",
        action="append",
        default=None,
        help="test pair file(s) (default: held out of --data)",
    )
    train.add_argument(
        "--vocab",
        default=None,
        help="vocabularies from build-vocab, or a run directory (default: learned)",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a finished run or a directory holding other files",
    )
    train.add_argument(
        "--out",
        required=True,
        help="run directory to write (an interrupted run resumes)",
    )
    _add_config_arguments(train, ModelConfig, "model")
    _add_config_arguments(train, TrainConfig, "training", skip=("split",))

    evaluate = sub.add_parser(
        "evaluate", help="BLEU, chrF and exact match of a trained run"
    )
    evaluate.add_argument("--model", required=True, help="run directory")
    evaluate.add_argument(
        "--data", default=None, help="TSV file (default: the run's held-out test split)"
    )
    evaluate.add_argument("--beam", type=int, default=1, help="beam size (1: greedy)")

    translate = sub.add_parser(
        "translate", help="translate sentences (arguments, or one per line on stdin)"
    )
    translate.add_argument("--model", required=True, help="run directory")
    translate.add_argument("--beam", type=int, default=1, help="beam size (1: greedy)")
    translate.add_argument(
        "--scores", action="store_true", help="print the score after a tab"
    )
    translate.add_argument(
        "text", nargs="*", help="sentences to translate (default: read stdin)"
    )

    export = sub.add_parser(
        "export", help="write a TF Serving SavedModel: EXPORT_DIR/VERSION/"
    )
    export.add_argument("--model", required=True, help="run directory")
    export.add_argument(
        "--export-dir",
        required=True,
        help="the model's base folder (holds the version folders)",
    )
    export.add_argument(
        "--version",
        type=int,
        default=None,
        help="version number (default: highest + 1)",
    )
    export.add_argument(
        "--beam",
        type=int,
        default=4,
        help="hypotheses of the translate_nbest signature",
    )
    export.add_argument(
        "--model-name",
        default="translator",
        help="served model name (warmup requests, docker line)",
    )

    check = sub.add_parser(
        "check-serving",
        help="op audit + run under the session loader of an exported version",
    )
    check.add_argument("path", help="an exported version folder, e.g. EXPORT_DIR/1")
    check.add_argument(
        "--serving-version",
        default=None,
        help="TF Serving release to audit against (default: all)",
    )
    return parser


def _run(args):
    if args.command == "demo":
        from keras_selfattn.workflows import run_demo

        result, _ = run_demo(args.out, epochs=args.epochs)
        print(f"run directory: {result.run_dir}")
        return 0

    if args.command == "train":
        from keras_selfattn.training import TrainConfig, train
        from keras_selfattn.workflows import report

        model_config = _config_from_args(ModelConfig, args)
        train_config = _config_from_args(TrainConfig, args)
        result = train(
            args.data,
            args.out,
            model_config,
            train_config,
            valid_data=args.valid_data,
            test_data=args.test_data,
            vocab=args.vocab,
            overwrite=args.overwrite,
        )
        if not result.is_chief:  # the chief evaluates and writes the run directory
            print(
                f"worker {result.worker_index} done; history: {json.dumps(result.history)}"
            )
            return 0
        report(result)
        print(f"run directory: {result.run_dir}")
        return 0

    if args.command == "build-vocab":
        from keras_selfattn.training import TrainConfig
        from keras_selfattn.workflows import build_vocab

        build_vocab(
            args.data,
            args.out,
            _config_from_args(TrainConfig, args),
            overwrite=args.overwrite,
        )
        return 0

    if args.command == "evaluate":
        import pathlib

        from keras_selfattn.inference import Translator, evaluate
        from keras_selfattn.text import read_pairs
        from keras_selfattn.training.train import SPLITS_DIR
        from keras_selfattn.workflows import print_metrics

        translator = Translator.load(args.model)
        data = args.data or pathlib.Path(args.model) / SPLITS_DIR / "test.tsv"
        metrics = evaluate(translator, read_pairs(data), beam_size=args.beam)
        print_metrics(metrics)
        print(
            json.dumps(
                {k: v for k, v in metrics.items() if k != "examples"}, sort_keys=True
            )
        )
        return 0

    if args.command == "translate":
        from keras_selfattn.inference import Translator

        # Bytes that are not UTF-8 become U+FFFD rather than a UnicodeDecodeError.
        texts = args.text or [
            line.rstrip("\r\n")
            for line in sys.stdin.buffer.read().decode("utf-8", "replace").splitlines()
        ]
        translator = Translator.load(args.model)
        for translation in translator.translate(texts, beam_size=args.beam):
            if translation.truncated:
                print(
                    f"keras-selfattn: warning: input truncated to {translator.max_source_len} tokens: "
                    f"{translation.source[:60]!r}",
                    file=sys.stderr,
                )
            line = translation.text
            if args.scores:
                line += f"\t{translation.score:.4f}"
            print(line)
        return 0
    if args.command == "export":
        from keras_selfattn import serving

        version_dir = serving.export_run(
            args.model,
            args.export_dir,
            args.version,
            model_name=args.model_name,
            beam_size=args.beam,
        )
        print(f"exported: {version_dir}")
        print(serving.serving_instructions(args.export_dir, args.model_name))
        return 0

    if args.command == "check-serving":
        from keras_selfattn import serving

        check = serving.check_serving(args.path, serving_version=args.serving_version)
        print(check.summary())
        return 0 if check.ok else 1
    raise AssertionError(args.command)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except (ValueError, FileNotFoundError, FileExistsError, ConnectionError) as error:
        parser.exit(2, f"keras-selfattn: error: {error}\n")
    except KeyboardInterrupt:
        parser.exit(
            130, "keras-selfattn: interrupted; rerun the same command to resume\n"
        )


if __name__ == "__main__":
    sys.exit(main())
