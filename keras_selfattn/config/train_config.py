"""The one configuration object of training; saved as JSON in every run directory."""

import dataclasses
from typing import ClassVar

from keras_selfattn.choices import (
    BEST_BY,
    BUCKET_SPACINGS,
    LR_SCHEDULES,
    STRATEGIES,
    TOKENIZER_KINDS,
    TOKENIZER_OPS,
)
from keras_selfattn.config.checks import (
    check_choices,
    check_field_types,
    check_known_keys,
    check_range,
)

# What a `TrainConfig` field matters for, declared once on the field
# (``metadata={"roles": ...}``, see `_field`); a field declared without roles has
# none. The lists of fields by role (`fields_with_role`) are read from there.
# Giving a field the DATA role changes what data.json records: interrupted runs
# recorded before then refuse to resume ("the data settings changed").
VOCAB = "vocab"  # the vocabularies depend on it (the build-vocab command's options)
DATA = "data"  # the data split depends on it (data.json records it; resuming checks)
PLACEMENT = "placement"  # where a run trains: a run may resume under another value
CONTINUATION = "continuation"  # a finished run may be continued with another value


def _field(default, *roles):
    """A dataclass field with a default and its roles."""
    return dataclasses.field(default=default, metadata={"roles": frozenset(roles)})


def fields_with_role(cls, role):
    """The names of ``cls``'s fields declared with ``role``, in declaration order."""
    return tuple(
        field.name
        for field in dataclasses.fields(cls)
        if role in field.metadata.get("roles", ())
    )


@dataclasses.dataclass
class TrainConfig:
    """How `train` fits a model.

    Attributes:
        epochs: the most epochs to train (early stopping may end sooner).
        batch_size: the *global* batch size: each step trains on this many pairs,
            split evenly across the replicas (``batch_size / replicas`` each;
            it must divide). The same configuration then computes the same
            steps on one device, several GPUs, several workers or a TPU.
        learning_rate: peak Adam learning rate.
        warmup_steps: optimizer updates of linear warm-up, then the learning rate
            follows lr_schedule (inverse_sqrt: peak * sqrt(warmup_steps / update);
            cosine: cosine decay to 5% at the last step).
        clipnorm: gradient-norm clipping (0 disables it).
        adam_beta_2: Adam's decay of its squared-gradient average, in (0, 1)
            (Keras' 0.999 by default; the Transformer's 0.98 forgets the large
            gradients of the first steps sooner, so early updates are larger).
        adam_epsilon: Adam's epsilon, > 0 (Keras' 1e-7; the Transformer's 1e-9).
        label_smoothing: smoothing of the one-hot targets in the loss, in [0, 1)
            (0: none; padding positions are ignored).
        seed: seeds the split, the shuffling, the initial weights and the dropouts:
            the same seed on the same machine gives the same weights.
        split: train / validation / test fractions of the pairs.
        source_tokenizer: ``"word"``, ``"char"``, ``"subword"`` (WordPiece) or
            ``"sentencepiece"`` (a unigram model learned from the data, or the
            one given by ``source_sentencepiece_model``).
        target_tokenizer: ``"word"``, ``"char"``, ``"subword"`` or
            ``"sentencepiece"`` (likewise, ``target_sentencepiece_model``).
        source_sentencepiece_model: a SentencePiece ``.model`` file to use for
            the source instead of learning one (needs ``source_tokenizer=
            "sentencepiece"``; special ids other than ours are remapped).
        target_sentencepiece_model: the same for the target.
        source_vocab_size: the size of a learned source vocabulary, the
            reserved tokens included: a word or char vocabulary keeps at most
            this many (None: every token); a subword (WordPiece) or
            sentencepiece one aims at it (None: 8,000; WordPiece's learner
            lands near it, not exactly on it).
        target_vocab_size: the same for the target.
        split_digits: make every digit its own source token.
        tokenizer_ops: ``"tensorflow_text"`` or ``"core"`` (core TF ops only).
        patience: validations in a row without a better best_by score (chrF by
            default, or BLEU or the validation loss) before training stops.
        jit_compile: compile the train step with XLA: ``True`` (the default),
            ``False``, or ``None``: XLA where the step runs on a GPU or TPU, not
            on CPUs (what ``--preset small`` sets). On a CPU XLA compiles the
            step once for each length bucket's shape: for the demo's small
            model that is soon paid back, for ``--preset small`` it costs more
            than its cheaper step gives back within an hour (benchmarks/RESULTS.md,
            "Training throughput", "Step cost" and "KerasHub peer, side by
            side"). With XLA: the
            whole step on one device, each replica's forward and backward pass
            with several replicas (the all-reduce and the update stay outside
            XLA; Keras' own ``"auto"`` turns XLA off under tf.distribute), and
            nothing extra on a TPU (it always compiles).
        strategy: ``"auto"``, ``"default"``, ``"mirrored"``, ``"multi_worker"`` or
            ``"tpu"``
            (see `get_strategy`).
        mixed_precision: ``"float32"``, ``"mixed_float16"`` (with dynamic loss
            scaling), ``"mixed_bfloat16"`` (no loss scaling needed) or
            ``"auto"`` (what ``--preset small`` sets): ``mixed_bfloat16`` where
            the step's device multiplies bfloat16 natively (a TPU, an Ampere or
            newer GPU, a CPU with ``avx512_bf16`` or ``amx_bf16``), else
            ``float32`` (`keras_selfattn.training.fit.compiled_model.native_bfloat16`).
            On such a CPU the ``small`` step is cheaper with the same loss curve;
            elsewhere bfloat16 is emulated and dearer (benchmarks/RESULTS.md,
            "Step cost" and "float32 against bfloat16"). A run trained
            under ``"auto"`` is loaded after training (translate, evaluate,
            export) in float32 unless asked otherwise
            (`inference.load_translator`).
        tpu: with ``strategy="tpu"``: ``"local"`` (a Cloud TPU VM), a TPU name or
            ``grpc://HOST:8470``; None lets ``TPUClusterResolver`` look it up.
        worker_timeout: seconds a worker waits for the others of ``TF_CONFIG`` (or
            for the TPU's address) before failing with the unreachable address.
        max_pairs: read at most this many pairs (None: all).
        train_steps: train this many optimizer steps in all (None: ``epochs``
            epochs of ``training pairs // batch_size`` steps, counted first).
        eval_every: steps between two validations (each one checkpoints the best
            model); default: one epoch, or 1000 steps with ``train_steps``. The
            last step is always validated.
        save_every: steps between two backups a run resumes from; default:
            ``eval_every``. The last step is always backed up.
        length_buckets: batches come in this many length buckets, each padded to
            its own lengths (1: every batch padded to the model's limits, the
            static shapes a TPU needs; a TPU strategy always uses 1).
        bucket_spacing: how the buckets divide the length limits: ``"even"``
            (bucket i of n up to (i + 1) / n of them) or ``"geometric"`` (each
            bucket sqrt(2) times the previous, the last at the limits: less
            padding when most pairs are far below the limits; use 6-8 buckets).
        batch_tokens: give each batch a budget of this many tokens (padding
            included, the longer side) instead of ``batch_size`` pairs.
        shuffle_buffer: pairs held in the shuffle buffer (bounded memory).
        max_validation_pairs: at most this many validation pairs (held out of
            ``data`` or read from ``valid_data``). Held-out pairs are drawn from
            the first ``max(cap / fraction)`` pairs of ``data`` (None: no cap, and
            the whole corpus is read to split it).
        max_test_pairs: at most this many test pairs.
        vocab_sample_lines: learn the vocabularies from the first this many
            training pairs (``build-vocab`` likewise).
        skip_malformed: skip malformed lines (and report their count) instead of
            failing with ``FILE:LINE: what is wrong``.
        strict_columns: a line with more than two tab-separated columns is
            malformed (by default its columns after the second are ignored and
            such lines are counted, reported at the end).
        lr_schedule: ``"inverse_sqrt"`` (linear warm-up, then ``peak *
            sqrt(warmup_steps / step)``, the Transformer's; it does not depend on
            the run's length, so a run continued further keeps its schedule) or
            ``"cosine"`` (warm-up, then cosine decay to 5% at the last step).
        best_by: what the best model and early stopping follow: ``"chrf"`` or
            ``"bleu"`` of greedy translations of the validation sample, or the
            validation ``"loss"``.
        validation_translations: validation pairs translated (greedy) at every
            validation for chrF, BLEU, three examples and the health check
            (0: none; then best_by must be "loss").
        threads: TensorFlow's intra-op and inter-op thread pools, this many
            threads each (None: TensorFlow's choice, one per core). Set before
            TensorFlow runs its first op; on a small shared CPU one thread a
            run is often cheaper per step than two.
        log_every: steps between two progress lines (loss, target tokens/s,
            ETA) when the output is not a terminal (0: none).
        accumulate_steps: apply the optimizer once every this many batches, to the
            mean of their gradients (Keras' gradient_accumulation_steps): an
            update then sees accumulate_steps times the batch, in the memory of
            one batch. train_steps, eval_every, save_every and log_every count
            batches; warmup_steps and the learning-rate schedule count updates.
        tensorboard: write TensorBoard event files to RUN_DIR/tensorboard (when
            the tensorboard package is installed: pip install
            keras-selfattn[tensorboard]).
        keep_checkpoints: after every validation, the model is also saved to
            ``checkpoints/step-<step>.keras``, keeping the newest this many, for
            ``keras-selfattn average`` (checkpoint averaging; 0: none).
        ema_momentum: keep an exponential moving average of the weights and
            validate, keep and export it instead of the last weights (Polyak
            averaging; `models.optimizers.MovingAverageAdam`): the average's
            decay at update t is min(ema_momentum, (1 + t) / (10 + t)), in
            [0, 1) (0: no average; 0.999: about the last 1,000 updates once
            past update 9,000, the last tenth of the run before).

    Some fields carry roles (`VOCAB`, `DATA`, `PLACEMENT`, `CONTINUATION`) that
    say what else depends on them; `fields_with_role` lists them.
    """

    epochs: int = _field(20, CONTINUATION)
    batch_size: int = 64
    learning_rate: float = 2e-3
    warmup_steps: int = 200
    clipnorm: float = 1.0
    adam_beta_2: float = 0.999
    adam_epsilon: float = 1e-7
    label_smoothing: float = 0.0
    seed: int = _field(0, DATA)
    split: tuple = _field((0.8, 0.1, 0.1), DATA)
    source_tokenizer: str = _field("word", VOCAB)
    target_tokenizer: str = _field("word", VOCAB)
    source_sentencepiece_model: str | None = _field(None, VOCAB)
    target_sentencepiece_model: str | None = _field(None, VOCAB)
    source_vocab_size: int | None = _field(None, VOCAB)
    target_vocab_size: int | None = _field(None, VOCAB)
    split_digits: bool = _field(True, VOCAB)
    tokenizer_ops: str = _field("tensorflow_text", VOCAB)
    patience: int = _field(4, CONTINUATION)
    jit_compile: bool | None = True
    strategy: str = _field("auto", PLACEMENT)
    mixed_precision: str = "float32"
    max_pairs: int | None = _field(None, DATA)
    tpu: str | None = _field(None, PLACEMENT)
    worker_timeout: float = _field(120.0, PLACEMENT)
    train_steps: int | None = _field(None, CONTINUATION)
    eval_every: int | None = _field(None, CONTINUATION)
    save_every: int | None = _field(None, CONTINUATION)
    length_buckets: int = 4
    bucket_spacing: str = "even"
    batch_tokens: int | None = None
    shuffle_buffer: int = 10_000
    max_validation_pairs: int = _field(5000, DATA)
    max_test_pairs: int = _field(5000, DATA)
    vocab_sample_lines: int = _field(1_000_000, VOCAB)
    skip_malformed: bool = _field(False, VOCAB, DATA)
    strict_columns: bool = _field(False, VOCAB)
    lr_schedule: str = "inverse_sqrt"
    best_by: str = "chrf"
    validation_translations: int = 500
    log_every: int = _field(100, PLACEMENT)
    keep_checkpoints: int = 0
    ema_momentum: float = 0.0
    accumulate_steps: int = 1
    tensorboard: bool = _field(True, PLACEMENT)  # output only, like log_every
    threads: int | None = _field(None, PLACEMENT)

    # The allowed values of the text fields (also the CLI's ``choices``).
    CHOICES: ClassVar[dict] = {
        "mixed_precision": ("float32", "mixed_float16", "mixed_bfloat16", "auto"),
        "strategy": STRATEGIES,
        "source_tokenizer": TOKENIZER_KINDS,
        "target_tokenizer": TOKENIZER_KINDS,
        "tokenizer_ops": TOKENIZER_OPS,
        "lr_schedule": LR_SCHEDULES,
        "best_by": BEST_BY,
        "bucket_spacing": BUCKET_SPACINGS,
    }

    # Fields added after runs were first saved, with the value that trains the way
    # those runs did (a config.json without the field resumes unchanged).
    ADDED_LATER: ClassVar[dict] = {
        "lr_schedule": "cosine",
        "best_by": "loss",
        "validation_translations": 0,
    }

    @classmethod
    def from_dict(cls, values, source="TrainConfig"):
        """A `TrainConfig` from a dict (``config.json``'s ``"train"``).

        Unknown keys are refused (the error names ``source``); a missing key takes
        its default, and a field in ``ADDED_LATER`` the value that trains the way
        runs saved before it existed did (the one place that applies it).
        """
        check_known_keys(cls, values, source)
        return cls(**{**cls.ADDED_LATER, **values})

    # Read from the fields' roles, below the class: the fields with the VOCAB role.
    VOCAB_FIELDS: ClassVar[tuple]

    def __post_init__(self):
        if isinstance(self.split, list):  # as JSON gives it back
            self.split = tuple(self.split)
        check_field_types(self)
        check_choices(self)
        for name in (
            "epochs",
            "batch_size",
            "max_pairs",
            "train_steps",
            "eval_every",
            "save_every",
            "length_buckets",
            "batch_tokens",
            "shuffle_buffer",
            "vocab_sample_lines",
            "accumulate_steps",
            "threads",
        ):
            check_range(self, name, minimum=1)
        for name in ("source_vocab_size", "target_vocab_size"):
            check_range(self, name, minimum=5)  # the 4 reserved tokens and one
        for name in (
            "warmup_steps",
            "patience",
            "clipnorm",
            "max_validation_pairs",
            "max_test_pairs",
            "validation_translations",
            "log_every",
            "keep_checkpoints",
        ):
            check_range(self, name, minimum=0)
        for name in ("learning_rate", "worker_timeout", "adam_epsilon"):
            check_range(self, name, above=0)
        check_range(self, "adam_beta_2", above=0, below=1)
        check_range(self, "label_smoothing", minimum=0, below=1)
        check_range(self, "ema_momentum", minimum=0, below=1)
        check_range(self, "seed", minimum=0, maximum=2**32 - 1)  # NumPy's seed range
        self._check_sentencepiece_models()
        if self.best_by != "loss" and not self.validation_translations:
            raise ValueError(
                f"best_by={self.best_by!r} scores the translations of the validation "
                "sample: set validation_translations > 0, or best_by='loss'. "
                f"Received: best_by={self.best_by!r}, validation_translations=0"
            )
        if (
            len(self.split) != 3
            or not all(
                isinstance(f, (int, float)) and not isinstance(f, bool)
                for f in self.split
            )
            or abs(sum(self.split) - 1.0) > 1e-6
            or min(self.split) < 0
        ):
            raise ValueError(
                "split must be three fractions summing to 1. "
                f"Received: split={self.split}"
            )

    def _check_sentencepiece_models(self):
        for side in ("source", "target"):
            model = getattr(self, f"{side}_sentencepiece_model")
            kind = getattr(self, f"{side}_tokenizer")
            if model is not None and kind != "sentencepiece":
                raise ValueError(
                    f"{side}_sentencepiece_model is a SentencePiece model for "
                    f"{side}_tokenizer='sentencepiece'. Received: {side}_tokenizer="
                    f"{kind!r}, {side}_sentencepiece_model={model!r}"
                )


TrainConfig.VOCAB_FIELDS = fields_with_role(TrainConfig, VOCAB)
# Where a run trains, not what it computes: a run may resume under other values.
PLACEMENT_FIELDS = fields_with_role(TrainConfig, PLACEMENT)
# The data settings ``data.json`` records: a run resumes only on the same ones.
DATA_FIELDS = fields_with_role(TrainConfig, DATA)
# What a continuation of a finished run may change (with the plan's period kept).
CONTINUATION_FIELDS = fields_with_role(TrainConfig, CONTINUATION)


def data_settings(train_config: TrainConfig):
    """The `DATA_FIELDS` of ``train_config``, as ``data.json`` records them."""
    values = {name: getattr(train_config, name) for name in DATA_FIELDS}
    return {
        name: list(value) if isinstance(value, tuple) else value
        for name, value in values.items()
    }


def same_training(first: "TrainConfig", second: "TrainConfig"):
    """Whether two configurations train the same model (placement aside)."""

    def what(config):
        values = dataclasses.asdict(config)
        return {
            name: value
            for name, value in values.items()
            if name not in PLACEMENT_FIELDS
        }

    return what(first) == what(second)
