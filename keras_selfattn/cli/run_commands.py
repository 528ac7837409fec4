"""The commands that write a run: demo, build-vocab, train, average, shortlist."""

import dataclasses

from keras_selfattn.choices import DEFAULT_FREQUENT, DEFAULT_PER_SOURCE
from keras_selfattn.cli import errors
from keras_selfattn.cli.command import add_command, progress
from keras_selfattn.cli.flags import (
    add_config_arguments,
    add_data_option,
    add_grouped_config_arguments,
    add_model_option,
    config_from_args,
    count,
    shows,
    train_groups,
)
from keras_selfattn.config import ModelConfig, TrainConfig
from keras_selfattn.config.presets import PRESETS, preset_configs
from keras_selfattn.run_directory.layout import (
    CONFIG_FILE,
    DATA_FILE,
    METRICS_FILE,
    checkpoint_step,
)
from keras_selfattn.run_directory.rerun import rerun_configs, stored_run
from keras_selfattn.run_directory.vocabulary_settings import (
    VOCABULARY_SETTINGS,
    train_config_with_vocabulary,
)


def add_demo(subparsers):
    parser = add_command(
        subparsers,
        "demo",
        _demo,
        help="the main job: train on the bundled dates corpus, evaluate, plot",
    )
    parser.add_argument(
        "--out", default="runs/demo", metavar="DIR", help="run directory"
    )
    epochs = parser.add_argument(
        "--epochs", type=count(1), metavar="N", help="override the demo's epoch count"
    )
    shows(epochs, "the demo's 4")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a finished run in --out"
    )
    _add_figures_option(parser)
    parser.set_defaults(configure=_check_figures)


def _add_figures_option(parser):
    """--no-figures: the final report writes the test metrics but no figures."""
    parser.add_argument(
        "--no-figures",
        dest="figures",
        action="store_false",
        help="metrics only: no RUN_DIR/plots, no matplotlib",
    )


def _check_figures(args):
    """A run that draws figures needs matplotlib: refused before it trains, as a
    run of hours would otherwise fail in its final report."""
    from keras_selfattn import plotting  # numpy: only for a run's figures

    if args.figures and not plotting.matplotlib_installed():
        raise ValueError(
            "the run's figures (RUN_DIR/plots) need matplotlib, which is not "
            f"installed: {plotting.INSTALL}, or pass --no-figures to write the "
            "metrics without them"
        )


def _demo(args):
    from keras_selfattn import jobs

    result, metrics = jobs.run_demo(
        args.out,
        epochs=args.epochs,
        overwrite=args.overwrite,
        verbose=progress(args),
        figures=args.figures,
        check_details=args.verbose or args.debug,
    )
    _print_result(result.run_dir, metrics)
    return 0


def _print_result(run_dir, metrics):
    """The result last: the run's test scores in one line (``metrics``, as
    `jobs.report` returns them; none without a test split) and where the run is."""
    test = metrics.get("test")
    if test:
        search = "greedy" if test["beam_size"] == 1 else f"beam {test['beam_size']}"
        print(
            f"test split: chrF {test['chrf']:.2f}  BLEU {test['bleu']:.2f}  "
            f"exact match {100 * test['exact_match']:.2f}%  ({test['count']} pairs, "
            f"{search}; {run_dir}/{METRICS_FILE})"
        )
    print(f"run directory: {run_dir}")


def add_build_vocab(subparsers):
    parser = add_command(
        subparsers,
        "build-vocab",
        _build_vocab,
        help="learn the vocabularies from pair files, in bounded memory",
    )
    add_data_option(parser, "pair file or glob (*.tsv.gz); repeatable")
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="directory for the vocabularies and tokenizer.json",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace vocabularies in --out"
    )
    add_config_arguments(
        parser, TrainConfig, "tokenizer", only=TrainConfig.VOCAB_FIELDS
    )


def _build_vocab(args):
    from keras_selfattn import jobs

    config = config_from_args(TrainConfig, args)
    jobs.build_vocab(args.data, args.out, config, overwrite=args.overwrite)
    return 0


def add_train(subparsers):
    parser = add_command(
        subparsers,
        "train",
        _train,
        help="train on source<TAB>target pair files",
        usage="%(prog)s --data FILE --out DIR [--epochs N] [--preset NAME] [options]"
        "\n       %(prog)s --out RUN_DIR [--train-steps N | --epochs N] (resume or "
        "continue the run there, with its settings)",
    )
    groups = train_groups(parser)
    data = add_data_option(
        groups["data"], "pair file or glob (*.tsv.gz); repeatable", required=False
    )
    shows(data, "required for a new run; a run in --out remembers its own")
    for flag, split in (("--valid-data", "validation"), ("--test-data", "test")):
        held_out = groups["data"].add_argument(
            flag, action="append", metavar="FILE", help=f"{split} pairs"
        )
        shows(held_out, "held out of --data")
    vocab = groups["data"].add_argument(
        "--vocab",
        metavar="DIR",
        help="build-vocab's output or a run",
    )
    shows(vocab, "learned")
    _add_run_directory_options(groups["run directory"])
    _add_figures_option(groups["run directory"])
    preset = groups["training"].add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="a recipe for real text; the flags given override it",
    )
    shows(preset, "no preset, the defaults shown below")
    add_grouped_config_arguments(groups, ModelConfig, TrainConfig, skip=("split",))
    parser.set_defaults(configure=_configure_train)


def _add_run_directory_options(group):
    """train's --out and --overwrite."""
    group.add_argument(
        "--out", required=True, metavar="DIR", help="the run directory to write"
    )
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a finished run, or other files in --out",
    )


def _configure_train(args):
    """``args.model_config`` and ``args.train_config``: the preset, then the flags;
    with ``--vocab``, the vocabulary's tokenizer settings (a flag typed that
    contradicts one is refused, naming both). A run in ``--out`` (without
    ``--overwrite``) gives its own settings and data instead of the defaults
    (`_configure_rerun`). Figures without matplotlib are refused first
    (`_check_figures`)."""
    _check_figures(args)
    stored = None if args.overwrite else stored_run(args.out)
    if stored is not None:
        _configure_rerun(args, stored)
        return
    if args.data is None:
        raise ValueError(
            f"--data is required: --out {args.out} holds no run to resume or "
            "continue. Received: no --data"
        )
    bases = preset_configs(args.preset) if args.preset else (None, None)
    args.model_config = config_from_args(ModelConfig, args, bases[0])
    args.train_config = config_from_args(TrainConfig, args, bases[1])
    if args.vocab is not None:
        args.train_config = train_config_with_vocabulary(
            args.train_config, args.vocab, given=_typed_flags(args, VOCABULARY_SETTINGS)
        )


def _configure_rerun(args, stored):
    """A rerun on the run ``stored`` (`run_directory.rerun.StoredRun`): its
    settings and data, with the settings typed (flags, ``--preset``, ``--vocab``)
    applied where they may change and refused, in one line, where they may not
    (`rerun_configs`). Says so in one line."""
    given = {}
    for cls, base in zip(
        (ModelConfig, TrainConfig),
        preset_configs(args.preset) if args.preset else (None, None),
        strict=True,
    ):
        names = [field.name for field in dataclasses.fields(cls)]
        given[cls] = _preset_settings(args.preset, base, names)
        typed = _typed_flags(args, names)
        given[cls].update({name: (typed[name], getattr(args, name)) for name in typed})
    if args.vocab is not None:
        given[TrainConfig].update(_vocabulary_given(args, stored, given[TrainConfig]))
    args.model_config, args.train_config, changes = rerun_configs(
        stored, given[ModelConfig], given[TrainConfig]
    )
    for name in ("data", "valid_data", "test_data"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(stored, name))
    changed = f"; changed: {', '.join(changes)}" if changes else ""
    print(
        f"{stored.run_dir} holds {_ARTICLE[stored.state]} {stored.state} run: using "
        f"the settings and data it recorded ({CONFIG_FILE}, {DATA_FILE}){changed}",
        flush=True,
    )


_ARTICLE = {"interrupted": "an", "finished": "a"}


def _preset_settings(preset, base, names):
    """The settings a typed ``--preset`` gives (name -> ``(how, value)``): those
    where its configuration ``base`` differs from the defaults."""
    if base is None:
        return {}
    default = type(base)()
    return {
        name: (f"--preset {preset}", getattr(base, name))
        for name in names
        if getattr(base, name) != getattr(default, name)
    }


def _vocabulary_given(args, stored, given):
    """The tokenizer settings ``--vocab`` gives a rerun (name -> ``(how,
    value)``), a typed flag that contradicts the vocabulary refused."""
    values = {name: value for name, (_, value) in given.items()}
    asked = dataclasses.replace(stored.train_config, **values)
    with_vocabulary = train_config_with_vocabulary(
        asked, args.vocab, given=_typed_flags(args, VOCABULARY_SETTINGS)
    )
    return {
        name: (f"--vocab {args.vocab}", getattr(with_vocabulary, name))
        for name in VOCABULARY_SETTINGS
        if name not in given
    }


def _typed_flags(args, names):
    """The flags of ``names`` given on the command line: name -> "--flag value"."""
    typed = {}
    for name in names:
        value = getattr(args, name, None)
        flag = name.replace("_", "-")
        if isinstance(value, bool):
            typed[name] = f"--{'' if value else 'no-'}{flag}"
        elif value is not None:
            typed[name] = f"--{flag} {value}"
    return typed


def _train(args):
    from keras_selfattn import jobs, training

    metrics = {}

    def report(result):  # the chief, before the run is marked finished
        metrics.update(jobs.report(result, figures=args.figures))

    result = training.train(
        args.data,
        args.out,
        args.model_config,
        args.train_config,
        valid_data=args.valid_data,
        test_data=args.test_data,
        vocab=args.vocab,
        overwrite=args.overwrite,
        verbose=progress(args),
        on_finished=report,
    )
    if not result.is_chief:  # the chief evaluates and writes the run directory
        jobs.print_worker_summary(result)
        return 0
    status = errors.health_status(result)
    _print_result(result.run_dir, metrics)
    return status


def add_average(subparsers):
    parser = add_command(
        subparsers,
        "average",
        _average,
        help="average a run's kept checkpoints (train --keep-checkpoints N) into "
        "its model.keras",
    )
    add_model_option(parser)
    last = parser.add_argument(
        "--last", type=count(2), metavar="N", help="average the newest N checkpoints"
    )
    shows(last, "all kept")
    out = parser.add_argument(
        "--out", metavar="FILE", help="write the average to this .keras file"
    )
    shows(out, "RUN_DIR/model.keras, the model it replaces kept beside it")


def _average(args):
    from keras_selfattn.training.checkpoint_averaging import average_run

    errors.check_run_directory(args.model)
    path, averaged = average_run(args.model, last=args.last, out=args.out)
    steps = ", ".join(str(checkpoint_step(p)) for p in averaged)
    print(f"{path}: the average of {len(averaged)} checkpoints (steps {steps})")
    return 0


def add_shortlist(subparsers):
    parser = add_command(
        subparsers,
        "shortlist",
        _shortlist,
        help="learn a run's vocabulary shortlist (RUN_DIR/shortlist.npz) from its "
        "recorded training split, for a run trained without one or another size",
    )
    add_model_option(parser)
    parser.add_argument(
        "--frequent",
        type=count(1),
        default=DEFAULT_FREQUENT,
        metavar="N",
        help="the most frequent target pieces kept for every batch (--shortlist N)",
    )
    parser.add_argument(
        "--per-source",
        type=count(1),
        default=DEFAULT_PER_SOURCE,
        metavar="N",
        help="target pieces kept per source piece",
    )


def _shortlist(args):
    from keras_selfattn.training.data.run_shortlist import learn_run_shortlist

    with errors.reading("the run directory", args.model):
        table = learn_run_shortlist(
            args.model, per_source=args.per_source, frequent=args.frequent
        )
    record = table.record
    print(
        f"{args.model}: shortlist of {record['per_source']} pieces per source piece "
        f"+ {record['frequent']} most frequent, from {record['pairs_counted']} "
        "training pairs"
    )
    return 0
