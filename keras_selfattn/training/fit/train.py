"""`train`: sentence pairs in, a run directory with a trained model out."""

import contextlib
import dataclasses
import functools
import os
import pathlib
import shutil
import tempfile
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.config import TrainConfig
from keras_selfattn.models import ModelConfig
from keras_selfattn.run_directory.damaged import RunFileDamaged
from keras_selfattn.run_directory.layout import BACKUP_DIR, worker_backup_dir
from keras_selfattn.run_directory.vocabulary_settings import (
    train_config_with_vocabulary,
)
from keras_selfattn.training.callbacks.progress import fit_verbosity
from keras_selfattn.training.data.run_batches import make_training_datasets
from keras_selfattn.training.distribute.distributed import (
    lost_peers_are_errors,
    worker_role,
)
from keras_selfattn.training.distribute.strategy import get_strategy, set_threads
from keras_selfattn.training.fit import stages
from keras_selfattn.training.fit.compiled_model import (
    build_and_compile,
    dtype_policy,
    training_policy,
)
from keras_selfattn.training.resume.backup import backed_up_epochs
from keras_selfattn.training.resume.continuation import reopen_finished_run
from keras_selfattn.training.resume.run_lock import LOCK_FILE, hold_and_claim_run_dir
from keras_selfattn.training.resume.run_state import run_dir_state


@dataclasses.dataclass
class TrainResult:
    """What `train` returns: the trained model and everything needed to use it."""

    run_dir: pathlib.Path
    model: keras.Model
    tokenizer: text.PairTokenizer
    model_config: ModelConfig
    train_config: TrainConfig
    history: dict  # Keras' logs of the periods this call trained, and their "step"
    test_pairs: list
    worker_index: int = 0
    is_chief: bool = (
        True  # False: another worker wrote run_dir; this one's files are gone
    )
    summary: dict | None = (
        None  # steps, pairs read and dropped for length (training.json)
    )


class TrainInterrupted(KeyboardInterrupt):
    """`train` interrupted (Ctrl-C, or a signal the caller turned into a
    KeyboardInterrupt); ``rerun`` says what the same call does next: resume from
    the last backup, finish the run whose steps are done, or start from step 0.
    ``exit_status`` and ``signal_name`` are the interrupt's own, when it has them.
    """

    def __init__(self, rerun, interrupt=None):
        super().__init__(rerun)
        self.rerun = rerun
        for name in ("exit_status", "signal_name"):
            if hasattr(interrupt, name):
                setattr(self, name, getattr(interrupt, name))


def train(  # long by its docstring only (the public contract); the body is 35 lines
    data: str
    | os.PathLike[str]
    | Sequence[str | os.PathLike[str] | tuple[str, str]]
    | None = None,
    run_dir: str | os.PathLike[str] = "runs/latest",
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    verbose: str | int = "auto",
    callbacks: Sequence[keras.callbacks.Callback] = (),
    *,
    valid_data: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    test_data: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    vocab: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    on_finished: Callable[[TrainResult], object] | None = None,
) -> TrainResult:
    """Trains a `build_seq2seq` model with ``model.fit`` on pairs streamed from files.

    The data is streamed (`text.stream`): nothing proportional to the corpus is
    held in memory. Validation and test pairs come from ``valid_data`` /
    ``test_data`` or are held out of ``data`` by a fingerprint of the source
    text (`text.fingerprint_split`, at most ``max_validation_pairs`` /
    ``max_test_pairs``, drawn from a window at the head of the stream: 50,000
    pairs with the defaults, whatever the corpus size). The vocabularies come
    from ``vocab`` or are learned from the first ``vocab_sample_lines`` training
    pairs. Batches are bucketed by length (`TrainConfig.length_buckets`).
    Training runs ``train_steps`` steps
    (or ``epochs`` epochs), validates every ``eval_every`` steps keeping the best
    model (``model.keras``, replaced atomically) and stopping early after
    ``patience`` validations without progress, and backs up every
    ``save_every`` steps: rerunning the same call after a crash resumes from the
    last backup (weights, optimizer, step, early stopping, dropout seeds, and on
    one replica the input iterator itself) on the batches an uninterrupted run
    would have seen. A finished run or a directory holding anything else is
    refused unless ``overwrite``; an interrupted run whose data or configuration
    changed is refused, naming what changed. A failed call leaves no run
    directory it created behind (unless a backup exists to resume from).

    The run directory receives ``model.keras``, ``config.json``, ``data.json``,
    the vocabularies, ``tokenizer.json``, ``history.csv`` (a row per period,
    keyed by step), ``training.json`` (steps, pairs dropped for length) and
    ``splits/``.

    Distributed (``train_config.strategy``, see `get_strategy`): the strategy is
    created first, the model is built and compiled in its scope, and
    ``train_config.batch_size`` is the global batch, split across the replicas.
    With several workers every worker runs this same call; the chief writes
    ``run_dir``, the others write to a temporary directory that is removed at the
    end, and every worker keeps its own backups in ``run_dir/backup/worker-<i>``.
    With several replicas a resumed run skips the batches trained on (a
    distributed iterator cannot be checkpointed).

    Args:
        data: file path(s) or glob pattern(s) of ``source<TAB>target`` lines
            (``.gz`` read), a list of pairs (small data: written to
            ``run_dir/pairs.tsv`` and streamed), or None for the bundled corpus.
        run_dir: the run directory (created; reused when resuming).
        model_config: a `ModelConfig` (default: ``ModelConfig()``).
        train_config: a `TrainConfig` (default: ``TrainConfig()``).
        verbose: what is printed while training (`fit_verbosity`): ``"auto"``
            (a progress bar on a terminal, progress lines otherwise: what the
            command line prints), 0 (nothing), 1 (the bar) or 2 (the lines).
        callbacks: extra Keras callbacks.
        valid_data: validation file pattern(s) (default: held out of ``data``).
        test_data: test file pattern(s) (default: held out of ``data``).
        vocab: a directory with ``tokenizer.json`` and the vocabularies
            (`jobs.build_vocab`'s output or a run directory). Its tokenizer
            settings replace ``train_config``'s
            (`train_config_with_vocabulary`); a field set away from
            its default that contradicts them is refused.
        overwrite: replace a finished run or a directory holding other files.
        on_finished: called with the `TrainResult` (on the chief) once the
            steps are done and before the run is marked finished, the run's lock
            still held: the command line writes the test metrics and the plots
            there, so that an interrupted call is finished by the same call.

    Returns:
        A `TrainResult`.

    Raises:
        TrainInterrupted: on a KeyboardInterrupt, saying what the rerun does.
    """
    train_config = train_config or TrainConfig()
    if vocab is not None:
        train_config = train_config_with_vocabulary(train_config, vocab)
    call = stages.TrainCall(
        run_dir=pathlib.Path(run_dir),
        model_config=model_config or ModelConfig(),
        train_config=train_config,
        data=data,
        valid_data=valid_data,
        test_data=test_data,
        vocab=vocab,
        verbose=fit_verbosity(verbose),
        callbacks=tuple(callbacks),
    )
    # First, before any TensorFlow op: multi-worker collectives are configured
    # at start-up.
    strategy, role = _start_strategy(train_config)
    place, lock = _claim_run_dir(call, strategy, role, run_dir, overwrite)
    try:
        # A peer lost mid-run (a collective failing) becomes one clear error naming it.
        with (
            lost_peers_are_errors(role, place.run_dir),
            _rerun_named(call, place, None),
        ):
            return _train(call, place, on_finished)
    except BaseException as error:
        # No backup: nothing to resume, so leave nothing.
        if not (place.run_dir / BACKUP_DIR).exists():
            _remove_what_this_call_wrote(place)
        malformed = text.stream.malformed_line_error(error)
        if isinstance(error, tf.errors.InvalidArgumentError) and malformed:
            raise malformed from None
        raise
    finally:
        if not role.is_chief:
            shutil.rmtree(place.work_dir, ignore_errors=True)
        if lock is not None:
            lock.release()


def _train(call, place, on_finished=None):
    """The stages of a run, in order: each takes what it needs and returns what
    it makes."""
    stages.check_resumed_config(call, place)
    keras.utils.set_random_seed(call.train_config.seed)
    data = stages.prepare_data(call, place)
    with _rerun_named(call, place, data.plan):
        restart = stages.agree_on_restart_point(call, place, data.plan)
        batches = stages.prepare_batches(call, place, data, restart)
        with dtype_policy(_policy(call, place)):
            built = stages.build_model(call, place, data, restart)
            outcome = stages.fit(call, place, data, batches, built, restart)
            finished = stages.finish(call, place, batches, built, outcome)
        result = _result(call, place, data, outcome, finished)
        stages.write_shortlist(call, place, data)
        if on_finished is not None and place.role.is_chief:
            on_finished(result)
        stages.mark_finished(place, finished.summary)
    return result


def _policy(call, place):
    """The run's dtype policy (`training_policy`), said when chosen automatically."""
    policy = training_policy(call.train_config, tpu=place.tpu)
    if place.verbose and call.train_config.mixed_precision == "auto":
        print(f"mixed precision: auto -> {policy}")
    return policy


def _result(call, place, data, outcome, finished):
    """The `TrainResult` of a run whose steps are done (`stages.finish`)."""
    history = outcome.history
    return TrainResult(
        run_dir=call.run_dir,
        model=finished.model,
        tokenizer=data.tokenizer,
        model_config=call.model_config,
        train_config=call.train_config,
        history={
            **{k: [float(v) for v in vs] for k, vs in history.history.items()},
            "step": [data.plan.step_after(epoch + 1) for epoch in history.epoch],
        },
        test_pairs=list(data.run_data.test),
        worker_index=place.role.index,
        is_chief=place.role.is_chief,
        summary=finished.summary,
    )


def _start_strategy(train_config):
    """``(strategy, role)``; the global batch must split over the replicas."""
    set_threads(train_config.threads)
    strategy = get_strategy(
        train_config.strategy,
        tpu=train_config.tpu,
        worker_timeout=train_config.worker_timeout,
    )
    replicas = strategy.num_replicas_in_sync
    if train_config.batch_size % replicas:
        raise ValueError(
            "batch_size is the global batch and must split evenly across the "
            f"{replicas} replicas. Received: batch_size={train_config.batch_size}"
        )
    return strategy, worker_role(strategy)


def _claim_run_dir(call, strategy, role, given_run_dir, overwrite):
    """``(place, lock)``: this worker's `stages.WorkerPlace`, and the run
    directory's held lock (the chief; None elsewhere).

    ``given_run_dir`` is ``run_dir`` as the caller wrote it: a remote URL
    (``gs://...``) is refused by name, before `pathlib.Path` folds its ``//``.

    The chief holds the run directory's lock (run_lock.py) before writing
    anything; a finished run that this call only trains longer continues
    (continuation.py). The chief writes the run directory; the other workers run
    the same callbacks (saving may read synchronized variables) into a scratch
    directory.
    """
    backup_dir = worker_backup_dir(call.run_dir / BACKUP_DIR, role.index)
    place = functools.partial(
        stages.WorkerPlace,
        strategy=strategy,
        role=role,
        run_dir=call.run_dir,
        backup_dir=backup_dir,
    )
    if not role.is_chief:
        prefix = f"keras-selfattn-worker{role.index}-"
        return place(
            work_dir=pathlib.Path(tempfile.mkdtemp(prefix=prefix)),
            resuming=backup_dir.exists(),
            fresh=False,
            created=False,
            verbose=0,
        ), None
    reopen = functools.partial(
        reopen_finished_run,
        model_config=call.model_config,
        train_config=call.train_config,
        data=call.data,
        valid_data=call.valid_data,
        test_data=call.test_data,
        verbose=bool(call.verbose),
    )
    state, created, lock = hold_and_claim_run_dir(
        given_run_dir, overwrite=overwrite, reopen=reopen
    )
    return place(
        work_dir=call.run_dir,
        resuming=state == "interrupted",
        fresh=state == "new",
        created=created,
        verbose=call.verbose,
    ), lock


def _remove_what_this_call_wrote(place):
    """The run directory this call created, or what it wrote into an empty one
    (`stages.WorkerPlace.fresh`): a failed call before any backup leaves nothing."""
    if place.created:
        shutil.rmtree(place.run_dir, ignore_errors=True)
    elif place.fresh and place.role.is_chief:
        for child in place.run_dir.iterdir():
            if child.name == LOCK_FILE:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)


@contextlib.contextmanager
def _rerun_named(call, place, plan):
    """A KeyboardInterrupt on the chief becomes `TrainInterrupted`, saying what
    the same call does next (`_rerun`, with the run's `StepPlan` once known)."""
    try:
        yield
    except TrainInterrupted:
        raise
    except KeyboardInterrupt as interrupt:
        if not place.role.is_chief:
            raise
        raise TrainInterrupted(_rerun(call, place, plan), interrupt) from None


def _rerun(call, place, plan):
    """What the same call does after an interrupt, in the words the user reads."""
    if run_dir_state(place.run_dir) == "finished":
        return f"the run is finished and complete in {place.run_dir}"
    epochs = backed_up_epochs(place.backup_dir)
    if not epochs:
        return "nothing saved yet: the rerun starts from step 0"
    if plan is None:
        return "rerun the same command to resume from its last backup"
    step = plan.step_after(epochs[-1])
    if _run_done_at(call, place, plan, epochs[-1]):
        return (
            f"its {step} steps are done: rerun the same command to finish the run "
            "(its last validation, test metrics and any figures)"
        )
    return f"rerun the same command to resume from step {step}"


def _run_done_at(call, place, plan, epoch):
    """`stages.run_done_at`; a damaged backup is not (the rerun names it)."""
    try:
        return stages.run_done_at(call, place, plan, epoch)
    except RunFileDamaged:
        return False


__all__ = [
    "TrainInterrupted",
    "TrainResult",
    "build_and_compile",
    "dtype_policy",
    "make_training_datasets",
    "train",
]
