"""The command line's options: flags generated from the config dataclasses, the
options several commands share, and the "(default: ...)" of every help line.

`add_config_arguments` turns each field of `ModelConfig` or `TrainConfig` into a
``--flag`` whose help is the field's entry in the class docstring's
``Attributes:`` section (`field_docs`), and `config_from_args` builds the
dataclass back from the flags given; both speak the command line's words
(`cli_spelling`: ``--foo-bar`` where the docstring or the error says ``foo_bar``).
`append_defaults` writes each option's
"(default: ...)" once, after the parser is built; `shows` declares what it calls a
default that is not the value itself. Imports no Keras or TensorFlow.
"""

import argparse
import dataclasses
import inspect
import re
import typing

from keras_selfattn.cli.option_help import HELP, METAVARS, SHOWN_DEFAULTS


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help layout, with the options' descriptions in a column wide
    enough for most of them to start on the option's own line, and a switch
    written once: ``--[no-]tensorboard``."""

    def __init__(self, prog, indent_increment=2, max_help_position=26, width=None):
        super().__init__(prog, indent_increment, max_help_position, width)

    def _format_action_invocation(self, action):
        if isinstance(action, argparse.BooleanOptionalAction):
            return "--[no-]" + action.option_strings[0].removeprefix("--")
        return super()._format_action_invocation(action)


def field_docs(cls):
    """``{field: description}`` from the ``Attributes:`` section of ``cls``'s
    docstring."""
    doc = inspect.getdoc(cls) or ""
    docs, name, indent, inside = {}, None, None, False
    for line in doc.splitlines():
        if line.strip() == "Attributes:":
            inside = True
            continue
        if not inside:
            continue
        if line.strip() and not line.startswith(" "):
            break  # the next section
        match = re.match(r"^( +)(\w+): (.*)$", line)
        if match and (indent is None or len(match.group(1)) == indent):
            indent, name = len(match.group(1)), match.group(2)
            docs[name] = match.group(3).strip()
        elif name and line.strip():
            docs[name] += " " + line.strip()
    return {key: value.replace("``", "") for key, value in docs.items()}


def flag_name(name):
    """The flag of a dataclass field: ``foo_bar`` -> ``--foo-bar``."""
    return "--" + name.replace("_", "-")


# A value as ``name=value`` writes it: quoted, or a word up to a separator.
_VALUE = r"""(?:'([^']*)'|"([^"]*)"|([^\s,;)'"]+))"""
# Python references in a docstring that mean nothing on the command line.
_PYTHON_REFERENCES = (
    (re.compile(r"\s*\(see `[^`]*`\)"), ""),
    (re.compile(r"\s*\(`[^`]*`\)"), ""),
    (re.compile(r";\s*`[^`]*`\)"), ")"),
    (re.compile(r"`"), ""),
)


def cli_spelling(text, names, switches=(), words=()):
    """``text`` (a field's docstring or a config error) in the command line's words.

    ``name=value`` of a field in ``names`` becomes ``--name value`` (a switch's
    ``name=True`` ``--name``, ``name=False`` ``--no-name``), and a field name
    that holds an underscore, or is one of ``words``, becomes its flag; the
    library's messages keep their Python spelling for Python callers.
    """

    def assignment(match):
        name, value = (
            match.group(1),
            next(g for g in match.groups()[1:] if g is not None),
        )
        if value in ("True", "False") and name in switches:
            return flag_name(name if value == "True" else "no_" + name)
        shown = value if re.fullmatch(r"[\w.:/+-]+", value) else repr(value)
        return f"{flag_name(name)} {shown}"

    for name in sorted(names, key=len, reverse=True):
        text = re.sub(rf"(?<![\w-])({name})=\s*{_VALUE}", assignment, text)
        if "_" in name or name in words:
            text = re.sub(rf"(?<![\w-]){name}\b", flag_name(name), text)
    return text


def _help_spelling(text, cls, name, switch):
    """A field's docstring as its flag's help: flags for field names, the switch's
    own ``--x``/``--no-x`` for True/False, "none" (as the defaults show it) for
    None, no Python references."""
    names = [field.name for field in dataclasses.fields(cls)]
    text = cli_spelling(text, [*names, "valid_data", "test_data"])
    if switch:
        text = re.sub(r"\bwhen True\b", f"with {flag_name(name)}", text)
        text = re.sub(r"\bwhen False\b", f"with {flag_name('no_' + name)}", text)
        text = re.sub(r"\bTrue\b", flag_name(name), text)
        text = re.sub(r"\bFalse\b", flag_name("no_" + name), text)
    text = re.sub(r"\bNone\b", "none", text)
    for pattern, replacement in _PYTHON_REFERENCES:
        text = pattern.sub(replacement, text)
    return text


# What an option's default is called in its help, where that is not the value
# itself: a config flag's None means the dataclass default, and some Nones mean
# something ("held out of --data"). Set with `shows`; read by `append_defaults`.
_SHOWN_DEFAULT = "shown_default"


def shows(action, default):
    """Declares what the help calls ``action``'s default; returns ``action``."""
    setattr(action, _SHOWN_DEFAULT, default)
    return action


def _default_note(action):
    """What follows an option's help: " (required)", " (default: X)" or nothing.

    A switch (``--overwrite``: off unless given) and a positional argument that
    must be given show nothing; ``--x/--no-x`` shows yes or no, None "none".
    """
    if action.required and action.option_strings:
        return " (required)"
    if hasattr(action, _SHOWN_DEFAULT):
        default = getattr(action, _SHOWN_DEFAULT)
    elif action.required or action.nargs == 0 or action.default is argparse.SUPPRESS:
        return ""
    else:
        default = action.default
    if isinstance(default, bool):
        default = "yes" if default else "no"
    shown = "none" if default is None else str(default)
    return f" (default: {shown})".replace("%", "%%")


def append_defaults(parser):
    """Appends `_default_note` to the help of every option of ``parser`` and of its
    commands: the one place a default is written into the help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                append_defaults(command)
        elif action.help not in (None, argparse.SUPPRESS):
            action.help += _default_note(action)


def _is_switch(field):
    """Whether a field's flag is a ``--x/--no-x`` switch (a bool, or bool | None)."""
    return field.type is bool or bool in typing.get_args(field.type)


def _config_argument_kind(cls, field, default):
    """add_argument's keywords for a field: how its flag parses its value."""
    if isinstance(default, bool) or _is_switch(field):
        return {"action": argparse.BooleanOptionalAction}
    if default is None:  # an optional field (int | None) parses as its non-None type
        kind = next(t for t in typing.get_args(field.type) if t is not type(None))
    else:
        kind = type(default)
    choices = cls.CHOICES.get(field.name)
    if choices:
        return {"type": kind, "choices": choices}
    metavar = METAVARS.get(field.name, "N" if kind is int else field.name.upper())
    return {"type": kind, "metavar": metavar}


def _add_field(group, cls, field, docs):
    """``field`` of the dataclass ``cls`` as a ``--flag`` in ``group`` (see
    `add_config_arguments`)."""
    default = getattr(cls(), field.name)
    kind = _config_argument_kind(cls, field, default)
    switch = kind.get("action") is argparse.BooleanOptionalAction
    help_text = HELP.get(field.name) or _help_spelling(
        docs.get(field.name, ""), cls, field.name, switch
    )
    action = group.add_argument(
        flag_name(field.name),
        default=None,
        help=help_text.replace("%", "%%"),
        **kind,
    )
    shows(action, SHOWN_DEFAULTS.get(field.name, default))


def add_config_arguments(parser, cls, title, *, only=None, skip=()):
    """One ``--flag`` per field of the dataclass ``cls`` (``foo_bar`` -> ``--foo-bar``).

    Every flag defaults to None, meaning "the dataclass default" (the help shows
    that one); booleans (also ``bool | None``) get ``--x/--no-x``; a field
    listed in ``cls.CHOICES`` accepts only those values. The help line is the
    field's entry in the class docstring's ``Attributes:`` section, in the
    command line's words (`cli_spelling`). ``only`` (field names) or ``skip``
    limit the fields.
    """
    docs = field_docs(cls)
    group = parser.add_argument_group(title)
    for field in dataclasses.fields(cls):
        if field.name in skip or (only is not None and field.name not in only):
            continue
        _add_field(group, cls, field, docs)


# train's option groups, in the order --help shows them (the ones every run
# sets first): each one's title and the config fields in it
# (`add_grouped_config_arguments`; None: every field of the model's config); the
# command adds its own options to them. docs/command-line.md says what each
# group holds.
TRAIN_GROUPS = (
    (
        "data",
        ("max_pairs", "max_test_pairs", "skip_malformed", "strict_columns")
        + ("source_tokenizer", "target_tokenizer", "source_vocab_size")
        + ("target_vocab_size", "source_sentencepiece_model")
        + ("target_sentencepiece_model", "split_digits", "tokenizer_ops")
        + ("vocab_sample_lines",),
    ),
    (
        "run directory",
        ("save_every", "keep_checkpoints", "log_every", "tensorboard"),
    ),
    (
        "training",
        ("epochs", "train_steps", "batch_size", "learning_rate", "lr_schedule")
        + ("warmup_steps", "label_smoothing", "clipnorm", "adam_beta_2")
        + ("adam_epsilon", "ema_momentum", "accumulate_steps", "batch_tokens")
        + ("shuffle_buffer", "seed"),
    ),
    (
        "validation",
        ("eval_every", "best_by", "patience", "validation_translations")
        + ("max_validation_pairs",),
    ),
    ("model", None),
    (
        "speed",
        ("jit_compile", "mixed_precision", "length_buckets", "bucket_spacing")
        + ("threads", "strategy", "tpu", "worker_timeout"),
    ),
)


def train_groups(parser):
    """train's argument groups (`TRAIN_GROUPS`), made in order: ``{title: group}``."""
    return {title: parser.add_argument_group(title) for title, _ in TRAIN_GROUPS}


def add_grouped_config_arguments(groups, model_cls, train_cls, *, skip=()):
    """The fields of ``model_cls`` (all in the "model" group) and of ``train_cls``
    (each in its `TRAIN_GROUPS` group, in that order) as flags, as
    `add_config_arguments` makes them; a field of neither list is an error."""
    fields = {field.name: field for field in dataclasses.fields(train_cls)}
    docs = field_docs(train_cls)
    placed = set(skip)
    for title, names in TRAIN_GROUPS:
        if names is None:
            for field in dataclasses.fields(model_cls):
                _add_field(groups[title], model_cls, field, field_docs(model_cls))
            continue
        for name in names:
            _add_field(groups[title], train_cls, fields[name], docs)
        placed.update(names)
    unplaced = sorted(set(fields) - placed)
    if unplaced:
        raise ValueError(f"TRAIN_GROUPS places no group for {unplaced}")


def config_from_args(cls, args, base=None):
    """``cls`` from ``base`` (default: ``cls()``) and the flags given.

    Raises:
        ValueError: an invalid value; the message names the flags involved, in
            the command line's spelling (`cli_spelling`).
    """
    base = base or cls()
    values = vars(base).copy()
    given = []
    for field in dataclasses.fields(cls):
        value = getattr(args, field.name, None)
        if value is not None:
            values[field.name] = value
            given.append(field.name)
    try:
        return cls(**values)
    except ValueError as error:
        named = [name for name in given if re.search(rf"\b{name}\b", str(error))]
        if not named:
            raise
        fields = [field.name for field in dataclasses.fields(cls)]
        switches = [f.name for f in dataclasses.fields(cls) if _is_switch(f)]
        message = cli_spelling(str(error), fields, switches, words=named)
        missing = [flag_name(name) for name in named if flag_name(name) not in message]
        if missing:
            message += f" (from {', '.join(missing)})"
        raise ValueError(message) from None


def count(minimum):
    """An argparse type: an integer >= ``minimum``."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {minimum}. Received: {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {minimum}. Received: {value}"
            )
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


_OUTPUT_OPTIONS = (
    (
        "--quiet",
        "no progress lines of train and distill-data (other commands: no effect)",
    ),
    ("--verbose", "show TensorFlow's own log lines"),
    ("--debug", "--verbose, and an error's traceback"),
)


def add_output_options(parser, default):
    """--quiet, --verbose, --debug (on the main parser and on every command)."""
    for flag, help_text in _OUTPUT_OPTIONS:
        parser.add_argument(flag, action="store_true", default=default, help=help_text)


def add_data_option(parser, help_text, required=True):
    """--data, repeatable (and required, unless ``required`` is False): the pair
    files a command reads. Returns the action."""
    return parser.add_argument(
        "--data", action="append", required=required, metavar="FILE", help=help_text
    )


def add_model_option(parser):
    """--model: the run directory a command loads."""
    parser.add_argument(
        "--model", required=True, metavar="RUN_DIR", help="run directory"
    )


def add_beam_option(parser, help_text="beam size", default=1):
    """--beam: a beam size (1, the default, is greedy search)."""
    action = parser.add_argument(
        "--beam", type=count(1), default=default, metavar="K", help=help_text
    )
    if default == 1:
        shows(action, "1, greedy search")
