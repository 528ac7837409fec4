"""Bad-input and fault cases of the ``keras-selfattn`` command, and how to classify
them.

One list, two users: ``tests/test_cli_bad_input.py`` (and, for the cases that need
a trained run, ``tests/test_cli.py``) assert that every case ends in its expected
class; ``python tests/bad_input_table.py`` runs the same list in fresh processes and
writes the table of outcomes into ``tests/README.md``.

Outcome classes:

- ``clear error``: exit status 2 and a last stderr line ``...: error: ...`` naming
  what the case says it must name (the file or the argument), no traceback;
- ``sensible result``: exit status 0 and the case's own check of the output holds;
- ``silent wrong result``: exit status 0 but the check fails;
- ``unclear error``: exit status 2 without naming the file or argument;
- ``internal error``: exit status 70 (reported as a bug, one line);
- ``traceback``: a Python traceback reached the user;
- ``crash``: the process died from a signal (subprocess runs only);
- ``quiet stop``: exit status 141 and nothing on stderr, as a Unix tool whose
  reader went away (``| head``: a broken pipe);
- ``skipped``: the case cannot be set up here (e.g. mounting a small file
  system needs root); the tests skip it.

Operator cases (a second launch, a stale lock, SIGTERM, a full disk) set up
their fault in ``argv`` (a lock-holding process, a killed run, a small tmpfs)
and register its undoing in ``Workspace.cleanups``.
"""

import contextlib
import dataclasses
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import traceback
import zipfile

from tests import forked_commands

CLEAR = "clear error"
SENSIBLE = "sensible result"
WRONG = "silent wrong result"
UNCLEAR = "unclear error"
INTERNAL = "internal error"
TRACEBACK = "traceback"
CRASH = "crash"
QUIET = "quiet stop"
SKIPPED = "skipped"
OUTCOMES = (CLEAR, SENSIBLE, QUIET, WRONG, UNCLEAR, INTERNAL, TRACEBACK, CRASH)
OUTCOMES += (SKIPPED,)
REPO = pathlib.Path(__file__).resolve().parents[1]

# `train` options of the tiny run the cases that need one share.
HEALTH_CHECK_OFF = ["--validation-translations", "0", "--best-by", "loss"]
# With its figures: for the tests that look at RUN_DIR/plots.
TINY_RUN_WITH_FIGURES = [
    "--num-hiddens",
    "16",
    "--num-heads",
    "2",
    "--num-layers",
    "1",
    "--ffn-hiddens",
    "32",
    "--decoder-units",
    "32",
    "--embedding-dim",
    "8",
    "--max-target-len",
    "12",
    "--target-tokenizer",
    "char",
    "--warmup-steps",
    "5",
    "--batch-size",
    "32",
    "--no-jit-compile",  # XLA's compile time would dominate this tiny run
    # A few steps do not make a translator: no translations at each validation
    # (and no health check failing the run); tests/test_cli_watch.py covers them.
    *HEALTH_CHECK_OFF,
]
# No figures (the report's plots cost a tenth of a tiny run, matplotlib's import
# included): the tiny run of every test that does not look at them.
TINY_RUN_ARGS = [*TINY_RUN_WITH_FIGURES, "--no-figures"]

NOT_UTF8 = os.fsdecode(b"caf\xe9.tsv")  # how Python hands such argv bytes over


@dataclasses.dataclass
class Result:
    status: object  # exit status, or a negative signal number
    stdout: str
    stderr: str


@dataclasses.dataclass
class Workspace:
    """Where a case's files go; ``run`` is a finished tiny run (None if not needed)."""

    root: pathlib.Path
    run: pathlib.Path | None = None
    cleanups: list = dataclasses.field(default_factory=list)  # run after the case

    def file(self, name, content=b"un\tone\ndeux\ttwo\n"):
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        return str(path)

    def run_copy(self, name, change):
        """A copy of the trained run, ``change(copy)`` applied (a fault put in)."""
        copy = self.root / name
        shutil.copytree(self.run, copy)
        change(copy)
        return str(copy)


class Skip(Exception):
    """A case that cannot be set up on this machine (the message says why)."""


def _env():
    return dict(os.environ, PYTHONPATH=str(REPO))


# Holds the run-directory lock of argv[1] until its stdin closes, without importing
# TensorFlow; its lock records a `train` command line, as a real train's does.
LOCK_HOLDER = REPO / "tests" / "lock_holder.py"


def _lock_held(w, run_dir, *, killed=False):
    """``run_dir`` (made) with its lock held by another process, or left by one
    SIGKILLed."""
    pathlib.Path(run_dir).mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, str(LOCK_HOLDER), str(run_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_env(),
    )
    assert holder.stdout.readline() == b"held\n"
    if killed:  # SIGKILL, and wait until it is gone (its lock goes with it)
        holder.kill()
        holder.wait()
    w.cleanups.append(lambda: (holder.kill(), holder.wait()))
    return str(run_dir)


def _small_disk(w, size="64k"):
    """A folder on a tmpfs of ``size`` (needs root), unmounted after the case."""
    folder = w.root / "small-disk"
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise Skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    w.cleanups.append(lambda: subprocess.run(["umount", str(folder)], check=False))
    return folder


def _version_claimed(w, version):
    """An export base whose ``version`` is being written by another live process
    (its claim ``BASE/.export-lock-N`` holds that process' id)."""
    from keras_selfattn.serving.publishing import LOCK_PREFIX

    base = w.root / "base"
    base.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    (base / f"{LOCK_PREFIX}{version}").write_text(f"{holder.pid}\n")
    w.cleanups.append(lambda: (holder.kill(), holder.wait()))
    return str(base)


def _terminated_mid_training(w, argv):
    """Runs ``argv`` in a process, SIGTERMs it after its first backup; returns
    ``argv``."""
    run = pathlib.Path(argv[argv.index("--out") + 1])
    process = forked_commands.command(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env()
    )
    first_backup = run / "backup" / "worker-0" / "epoch-00001.json"
    while not first_backup.exists():
        if process.poll() is not None:
            raise RuntimeError(process.stderr.read().decode()[-3000:])
        time.sleep(0.05)
    process.terminate()
    _, err = process.communicate(timeout=300)
    (w.root / "terminated.txt").write_text(f"{process.returncode}\n{err.decode()}")
    assert not (run / "training.json").exists(), "finished before SIGTERM"
    return argv


# Put in the environment of a command a test signals: Python's faulthandler, so
# that `ended_within` can have a process that never ends print where it is.
WHERE_IT_HANGS = {"PYTHONFAULTHANDLER": "1"}


def ended_within(process, timeout):
    """``process.communicate(timeout=timeout)``; past the timeout, the process
    (started with `WHERE_IT_HANGS`) is sent SIGABRT, so that faulthandler prints
    every thread's Python stack, and the test fails with that stack."""
    import signal

    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        _, err = process.communicate()
        err = err.decode(errors="replace") if isinstance(err, bytes) else err
        raise AssertionError(
            f"still running {timeout} s after its signal; where it was:\n"
            f"{(err or '')[-6000:]}"
        ) from None


def signalled_at(argv, line, signum=None, timeout=300):
    """Runs ``keras-selfattn argv`` in a process (forked: `tests.forked_commands`,
    its stop signals at their defaults, as a terminal starts it) and sends it
    ``signum`` when it prints a line holding ``line`` (None: no signal); returns
    its `Result`."""
    import signal

    process = forked_commands.Popen(
        ["-u", "-m", "keras_selfattn", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    seen = []
    for printed in process.stdout if line is not None else ():
        seen.append(printed)
        if line in printed:
            process.send_signal(signal.Signals(signum))
            break
    else:
        if line is not None:
            process.wait(timeout=timeout)
            raise RuntimeError(f"{line!r} never printed: {''.join(seen)[-2000:]}")
    out, err = process.communicate(timeout=timeout)
    return Result(process.returncode, "".join(seen) + out, err)


def _interrupted_before_backup(w, argv):
    """Runs ``argv`` in a process, Ctrl-C at its first step (before any backup);
    checks that it says so; returns ``argv`` (the case reruns it)."""
    import signal

    stopped = signalled_at(argv, "step 1/", signal.SIGINT)
    (w.root / "interrupted.txt").write_text(f"{stopped.status}\n{stopped.stderr}")
    assert stopped.status == 130, stopped
    assert stopped.stderr.strip().splitlines()[-1] == (
        "keras-selfattn: interrupted; nothing saved yet: the rerun starts from step 0"
    ), stopped.stderr
    return argv


@dataclasses.dataclass
class Case:
    """One bad input: ``argv(workspace)`` and what a good CLI does with it."""

    name: str
    argv: object  # Workspace -> list of str
    expect: str = CLEAR
    mentions: tuple = ()  # what a clear error must name, formatted with the argv
    # what it must not say: the library's Python words, where the command
    # line has its own (a flag for a parameter, "--overwrite" for overwrite=True)
    avoids: tuple = ()
    check: object = None  # Result -> bool, for sensible results
    stdin: bytes | None = b""  # None: stdin closed (<&-)
    stdout: str | None = None  # "full", "closed" or "broken-pipe": a faulty stdout
    needs_run: bool = False
    slow: bool = False  # seconds even without a run (check-serving starts a process)
    # The test that asserts this case instead of tests/test_cli_bad_input.py: one
    # that makes the same run anyway (the table still runs the case).
    checked_in: str | None = None


# A vocabulary's tokenizer.json, as far as train --vocab reads it before loading it.
_CHAR_TARGETS = json.dumps(
    {
        "format": "keras_selfattn.text.PairTokenizer",
        "source": {"kind": "word"},
        "target": {"kind": "char"},
    }
).encode()


def _edit_config(change):
    def edit(run):
        path = run / "config.json"
        config = json.loads(path.read_text())
        change(config)
        path.write_text(json.dumps(config))

    return edit


def _truncate(name, keep=0.5):
    def edit(run):
        data = (run / name).read_bytes()
        (run / name).write_bytes(data[: int(len(data) * keep)])

    return edit


def _unknown_layer_argument(run):
    """model.keras whose model config holds an argument it does not take.

    The saved `Seq2Seq` model describes itself by its constructor arguments (it
    rebuilds its layers from them), so the argument goes there.
    """
    path = run / "model.keras"
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    text = files["config.json"].decode()
    marker = '"class_name": "Seq2Seq", "config": {'
    assert marker in text, "the run's model.keras is not a Seq2Seq model"
    text = text.replace(marker, marker + '"bogus_argument": 1, ', 1)
    files["config.json"] = text.encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)


def _pair_lines(count=400, third_column_at=()):
    """``count`` short pair lines; those numbered in ``third_column_at`` (from 1) get a
    tab inside their target, as Multi30k's train.de line 7366 has."""
    return "".join(
        f"{i} juillet 19{i % 90 + 10}\t"
        + ('"July\t' if i + 1 in third_column_at else "July ")
        + f"{i}\n"
        for i in range(count)
    ).encode()


def _gzip_pairs(count=400, keep=None, flip=None):
    """Gzipped pair lines, cut to ``keep`` of their bytes or with byte ``flip``
    inverted."""
    import gzip

    data = bytearray(gzip.compress(_pair_lines(count), mtime=0))
    if flip is not None:
        data[flip] ^= 0xFF
    return bytes(data if keep is None else data[: int(len(data) * keep)])


def _says(*words):
    return lambda result: all(word in result.stdout for word in words)


def _lines(count):
    return lambda result: result.stdout.count("\n") == count


def _python_spelling(flag):
    """How the library spells ``flag``'s parameter (``--max-pairs``: ``max_pairs``
    and ``max_pairs=``), which the command line's messages do not show."""
    name = flag.removeprefix("--").replace("-", "_")
    return (f"{name}=", name) if "_" in name else (f"{name}=",)


TRAIN = ["train", "--epochs", "1"]
# No translation health check (exit status 3 when a model does not translate,
# as a tiny run of a few steps does not): these cases are about other things.
TRAIN_TINY = [*TRAIN, *TINY_RUN_ARGS]
# The cases that train to their end only to show that the command gets there:
# two steps do (what costs is the model's building and tracing, not the steps).
TRAIN_TWO_STEPS = [*TRAIN_TINY, "--train-steps", "2"]

CASES = [
    # --data
    Case(
        "train --data a directory",
        lambda w: [*TRAIN, "--data", str(w.root), "--out", f"{w.root}/run"],
        mentions=("--data", "{4}"),
    ),
    Case(
        "train --data /dev/zero",
        lambda w: [*TRAIN, "--data", "/dev/zero", "--out", f"{w.root}/run"],
        mentions=("--data", "/dev/zero"),
    ),
    Case(
        "train --data a missing file",
        lambda w: [*TRAIN, "--data", f"{w.root}/missing.tsv", "--out", f"{w.root}/r"],
        mentions=("missing.tsv",),
    ),
    Case(
        "train --data a line without a tab",
        lambda w: [
            *TRAIN,
            "--data",
            w.file("bad.tsv", b"un\tone\ndeux sans tab\n"),
            "--out",
            f"{w.root}/run",
        ],
        mentions=("bad.tsv", ":2"),
    ),
    Case(
        "train --data an empty file",
        lambda w: [*TRAIN, "--data", w.file("empty.tsv", b""), "--out", f"{w.root}/r"],
        mentions=("empty.tsv",),
    ),
    Case(
        "train --data a file that is not UTF-8",
        lambda w: [
            *TRAIN,
            "--data",
            w.file("latin1.tsv", b"caf\xe9\tcoffee\n"),
            "--out",
            f"{w.root}/run",
        ],
        mentions=("latin1.tsv",),
    ),
    *[
        Case(
            f"train --data a .gz file cut at {keep:.0%} (a download cut short)",
            lambda w, keep=keep: [
                *TRAIN,
                *TINY_RUN_ARGS,
                "--data",
                w.file("cut.tsv.gz", _gzip_pairs(keep=keep)),
                "--out",
                f"{w.root}/run",
            ],
            mentions=("cut.tsv.gz", "truncated", "lines"),
        )
        for keep in (0.3, 0.97)
    ],
    Case(
        "train --data a .gz file whose CRC is wrong",
        lambda w: [
            *TRAIN,
            *TINY_RUN_ARGS,
            "--data",
            w.file("crc.tsv.gz", _gzip_pairs(flip=-8)),
            "--out",
            f"{w.root}/run",
        ],
        mentions=("crc.tsv.gz", "corrupt", "incorrect data check"),
    ),
    Case(
        "train --valid-data a cut .gz file",
        lambda w: [
            *TRAIN,
            *TINY_RUN_ARGS,
            "--data",
            w.file("pairs.tsv.gz", _gzip_pairs()),
            "--valid-data",
            w.file("valid.tsv.gz", _gzip_pairs(keep=0.5)),
            "--out",
            f"{w.root}/run",
        ],
        mentions=("valid.tsv.gz", "truncated"),
    ),
    Case(
        "build-vocab --data a cut .gz file",
        lambda w: [
            "build-vocab",
            "--data",
            w.file("cut.tsv.gz", _gzip_pairs(keep=0.5)),
            "--out",
            f"{w.root}/vocab",
        ],
        mentions=("cut.tsv.gz", "truncated"),
    ),
    Case(
        "train --data with a tab inside a target (three columns)",
        lambda w: [
            *TRAIN_TWO_STEPS,
            "--data",
            w.file("cols.tsv", _pair_lines(third_column_at=(7, 366))),
            "--out",
            f"{w.root}/run",
        ],
        expect=SENSIBLE,
        check=_says(
            "2 lines had more than two tab-separated columns; columns after the "
            "second were ignored"
        ),
        slow=True,
    ),
    Case(
        "train --strict-columns, a tab inside a target",
        lambda w: [
            *TRAIN,
            *TINY_RUN_ARGS,
            "--strict-columns",
            "--data",
            w.file("cols.tsv", _pair_lines(third_column_at=(366,))),
            "--out",
            f"{w.root}/run",
        ],
        mentions=("cols.tsv:366: more than two tab-separated columns",),
    ),
    Case(
        "build-vocab --data with a tab inside a target",
        lambda w: [
            "build-vocab",
            "--data",
            w.file("cols.tsv", _pair_lines(third_column_at=(7,))),
            "--out",
            f"{w.root}/vocab",
        ],
        expect=SENSIBLE,
        check=_says("1 line had more than two tab-separated columns"),
    ),
    Case(
        "build-vocab --data a line without a tab",
        lambda w: [
            "build-vocab",
            "--data",
            w.file("bad.tsv", b"un\tone\ndeux sans tab\n"),
            "--out",
            f"{w.root}/vocab",
        ],
        mentions=("bad.tsv:2: no tab character",),
    ),
    Case(
        "build-vocab --strict-columns, a tab inside a target",
        lambda w: [
            "build-vocab",
            "--strict-columns",
            "--data",
            w.file("cols.tsv", _pair_lines(third_column_at=(7,))),
            "--out",
            f"{w.root}/vocab",
        ],
        mentions=("cols.tsv:7: more than two tab-separated columns",),
    ),
    Case(
        "train --data a name that is not UTF-8 (argv bytes)",
        lambda w: [*TRAIN, "--data", NOT_UTF8, "--out", f"{w.root}/run"],
        mentions=("--data", "UTF-8"),
    ),
    # --out
    Case(
        "train --out below a file",
        lambda w: [
            *TRAIN,
            "--data",
            w.file("pairs.tsv"),
            "--out",
            w.file("plain-file") + "/run",
        ],
        mentions=("plain-file",),
    ),
    Case(
        "train --out under /sys",
        lambda w: [*TRAIN, "--data", w.file("pairs.tsv"), "--out", "/sys/ksa-run"],
        mentions=("/sys/ksa-run",),
    ),
    Case(
        "train --out ''",
        lambda w: [*TRAIN, "--data", w.file("pairs.tsv"), "--out", ""],
        mentions=("--out",),
    ),
    # numeric and enumerated options
    *[
        Case(
            f"train {flag} {value}",
            lambda w, flag=flag, value=value: [
                *TRAIN,
                "--data",
                w.file("pairs.tsv"),
                "--out",
                f"{w.root}/run",
                flag,
                value,
            ],
            mentions=(flag,),
            avoids=_python_spelling(flag),
        )
        for flag, value in [
            ("--max-pairs", "-5"),
            ("--warmup-steps", "-10"),
            ("--label-smoothing", "1.0"),
            ("--label-smoothing", "-0.1"),
            ("--learning-rate", "nan"),
            ("--epochs", "0"),
            ("--batch-size", "abc"),
            ("--dropout", "1.0"),
            ("--patience", "-1"),
            ("--clipnorm", "inf"),
            ("--seed", "-1"),
            ("--num-hiddens", "30"),  # not divisible by the 4 heads
            ("--accumulate-steps", "0"),
            ("--attention-heads", "3"),  # does not divide the decoder's units
            ("--keep-checkpoints", "-1"),
            ("--rnn-type", "rnn"),
            ("--worker-timeout", "0"),
        ]
    ],
    Case(
        "translate --beam 0",
        lambda w: ["translate", "--model", f"{w.root}/run", "--beam", "0", "x"],
        mentions=("--beam",),
    ),
    # the searches' length ratio, refused before any run is read
    *[
        Case(
            f"{command} --max-length-ratio {value}",
            lambda w, command=command, value=value: [
                command,
                "--model",
                f"{w.root}/run",
                *(["--export-dir", f"{w.root}/e"] if command == "export" else []),
                "--max-length-ratio",
                value,
            ],
            mentions=("--max-length-ratio", f"Received: {value!r}"),
            avoids=_python_spelling("--max-length-ratio"),
        )
        for command, value in [
            ("translate", "0"),
            ("translate", "-1"),
            ("translate", "two"),
            ("evaluate", "nan"),
            ("export", "inf"),
            ("export", "True"),
        ]
    ],
    Case(
        "export --version -1",
        lambda w: ["export", "--model", "r", "--export-dir", "e", "--version", "-1"],
        mentions=("--version",),
    ),
    Case(
        "average --last 1",
        lambda w: ["average", "--model", str(w.root), "--last", "1"],
        mentions=("--last",),
    ),
    Case(
        "average --model a run without kept checkpoints",
        lambda w: ["average", "--model", str(w.root)],
        mentions=("checkpoints", "--keep-checkpoints"),
    ),
    Case(
        "average --model a run another train holds (its lock)",
        lambda w: ["average", "--model", _lock_held(w, w.root / "run")],
        mentions=("{2}", "in use by another train", "process"),
    ),
    Case("an unknown command", lambda w: ["trian"], mentions=("trian",)),
    # exact option names: a prefix of an option is not taken for it
    Case(
        "train --epoch 2 (a prefix of --epochs)",
        lambda w: [
            "train",
            "--data",
            w.file("pairs.tsv"),
            "--out",
            "r",
            "--epoch",
            "2",
        ],
        mentions=("--epoch",),
    ),
    Case(
        "translate --bea 2 (a prefix of --beam)",
        lambda w: ["translate", "--model", str(w.root), "--bea", "2", "x"],
        mentions=("--bea",),
    ),
    # advice in the command line's own spelling
    Case(
        "train --out a directory holding other files (advice: --overwrite)",
        lambda w: [
            *TRAIN,
            "--data",
            w.file("pairs.tsv"),
            "--out",
            str(pathlib.Path(w.file("other/notes.txt")).parent),
        ],
        mentions=("{6}", "--overwrite"),
        avoids=("overwrite=True",),
    ),
    Case(
        "train --out a file",
        lambda w: [*TRAIN, "--data", w.file("pairs.tsv"), "--out", w.file("f.txt")],
        mentions=("--out", "{6}"),
        avoids=("run_dir",),
    ),
    Case(
        "build-vocab --out a folder holding vocabularies (advice: --overwrite)",
        lambda w: [
            "build-vocab",
            "--data",
            w.file("pairs.tsv"),
            "--out",
            str(pathlib.Path(w.file("vocab/tokenizer.json", b"{}")).parent),
        ],
        mentions=("{4}", "--overwrite"),
        avoids=("overwrite=True",),
    ),
    # run directories and exports that are not what they should be
    Case(
        "translate --model a missing directory",
        lambda w: ["translate", "--model", f"{w.root}/nothing", "x"],
        mentions=("nothing",),
    ),
    Case(
        "translate --model a file",
        lambda w: ["translate", "--model", w.file("pairs.tsv"), "x"],
        mentions=("pairs.tsv",),
    ),
    Case(
        "evaluate --model an empty directory",
        lambda w: ["evaluate", "--model", str(w.root)],
        mentions=("model.keras",),
    ),
    Case(
        "export --model a missing directory",
        lambda w: ["export", "--model", f"{w.root}/nothing", "--export-dir", "e"],
        mentions=("nothing",),
    ),
    Case(
        "check-serving on a folder without saved_model.pb",
        lambda w: ["check-serving", str(w.root)],
        mentions=("saved_model.pb",),
    ),
    Case(
        "check-serving on a garbage saved_model.pb",
        lambda w: [
            "check-serving",
            str(pathlib.Path(w.file("export/1/saved_model.pb", b"garbage\x00")).parent),
        ],
        mentions=("export/1",),
        slow=True,
    ),
    # faults in a trained run
    Case(
        "translate: stdin lines holding \\f, \\x1d and U+2028",
        lambda w: ["translate", "--model", str(w.run)],
        expect=SENSIBLE,
        check=_lines(3),
        stdin="14 juillet\f1989\n3 mai\x1d2001\n1 mai\u20282000\n".encode(),
        needs_run=True,
    ),
    Case(
        "translate: a CRLF stdin without a final newline",
        lambda w: ["translate", "--model", str(w.run)],
        expect=SENSIBLE,
        check=_lines(2),
        stdin=b"14 juillet 1989\r\n3 mai 2001",
        needs_run=True,
    ),
    Case(
        "translate: an empty stdin",
        lambda w: ["translate", "--model", str(w.run)],
        expect=SENSIBLE,
        check=_lines(0),
        needs_run=True,
    ),
    Case(
        "translate: stdin closed (<&-)",
        lambda w: ["translate", "--model", str(w.run)],
        expect=SENSIBLE,
        check=lambda result: (
            result.stdout == "" and "keras-selfattn" not in result.stderr
        ),
        stdin=None,
        needs_run=True,
    ),
    Case(
        "translate: Latin-1 stdin",
        lambda w: ["translate", "--model", str(w.run)],
        expect=SENSIBLE,
        check=lambda result: (
            result.stdout.count("\n") == 2
            and "stdin: 1 of 2 lines not valid UTF-8" in result.stderr
            and "iconv -f LATIN1 -t UTF-8" in result.stderr
        ),
        stdin=b"14 juillet 1989\n3 ao\xfbt 2001\n",
        needs_run=True,
    ),
    Case(
        "translate: a sentence that names an existing file",
        lambda w: ["translate", "--model", str(w.run), w.file("src.txt")],
        expect=SENSIBLE,
        check=lambda result: (
            result.stdout.count("\n") == 1
            and "is a file name: translating the text; to translate the file, "
            "use --input"
            in result.stderr
        ),
        needs_run=True,
    ),
    Case(
        "translate --input a missing file",
        lambda w: ["translate", "--model", str(w.run), "--input", f"{w.root}/no.txt"],
        mentions=("{4}", "No such file"),
        needs_run=True,
    ),
    Case(
        "translate --input FILE and a sentence too",
        lambda w: [
            "translate",
            "--model",
            str(w.run),
            "--input",
            w.file("src.txt"),
            "14 juillet 1989",
        ],
        mentions=("--input {4}", "not both"),
        needs_run=True,
    ),
    Case(
        "translate --input FILE --output FILE",
        lambda w: [
            "translate",
            "--model",
            str(w.run),
            "--input",
            w.file("src.txt", b"14 juillet 1989\n3 mai 2001\n"),
            "--output",
            f"{w.root}/out.txt",
        ],
        expect=SENSIBLE,
        check=lambda result: result.stdout == "",
        needs_run=True,
    ),
    Case(
        "evaluate --json: stdout is one JSON object",
        lambda w: ["evaluate", "--model", str(w.run), "--json"],
        expect=SENSIBLE,
        check=lambda result: json.loads(result.stdout)["count"] > 0,
        needs_run=True,
    ),
    Case(
        "translate: a sentence argument that is not UTF-8",
        lambda w: [
            "translate",
            "--model",
            str(w.run),
            os.fsdecode(b"14 juil\xe9 1989"),
        ],
        expect=SENSIBLE,
        check=_lines(1),
        needs_run=True,
    ),
    Case(
        "translate: config.json without its model object",
        lambda w: [
            "translate",
            "--model",
            w.run_copy("no-model-key", _edit_config(lambda c: c.pop("model"))),
            "x",
        ],
        mentions=("config.json", "model"),
        needs_run=True,
    ),
    Case(
        "translate: config.json with an unknown key",
        lambda w: [
            "translate",
            "--model",
            w.run_copy("unknown-key", _edit_config(lambda c: c["model"].update(x=1))),
            "x",
        ],
        mentions=("config.json", "'x'"),
        needs_run=True,
    ),
    Case(
        "translate: config.json with an invalid value",
        lambda w: [
            "translate",
            "--model",
            w.run_copy(
                "bad-value", _edit_config(lambda c: c["model"].update(num_heads=0))
            ),
            "x",
        ],
        mentions=("config.json", "num_heads"),
        needs_run=True,
    ),
    Case(
        "translate: config.json that is not JSON",
        lambda w: [
            "translate",
            "--model",
            w.run_copy("not-json", _truncate("config.json")),
            "x",
        ],
        mentions=("config.json",),
        needs_run=True,
    ),
    Case(
        "translate: a truncated model.keras",
        lambda w: [
            "translate",
            "--model",
            w.run_copy("truncated", _truncate("model.keras")),
            "x",
        ],
        mentions=("model.keras", "truncated"),
        needs_run=True,
    ),
    Case(
        "translate: an unknown layer argument in model.keras",
        lambda w: [
            "translate",
            "--model",
            w.run_copy("unknown-argument", _unknown_layer_argument),
            "x",
        ],
        mentions=("model.keras", "bogus_argument"),
        needs_run=True,
    ),
    Case(
        "evaluate --data /dev/zero",
        lambda w: ["evaluate", "--model", str(w.run), "--data", "/dev/zero"],
        mentions=("--data", "/dev/zero"),
        needs_run=True,
    ),
    Case(
        "evaluate --data a directory",
        lambda w: ["evaluate", "--model", str(w.run), "--data", str(w.root)],
        mentions=("--data",),
        needs_run=True,
    ),
    Case(
        "export --export-dir below a file",
        lambda w: [
            "export",
            "--model",
            str(w.run),
            "--export-dir",
            w.file("plain-file") + "/base",
        ],
        mentions=("plain-file",),
        needs_run=True,
    ),
    # SentencePiece models given by the user
    *[
        Case(
            f"{command} --source-sentencepiece-model {what}",
            lambda w, command=command, name=name, content=content: [
                *([command] if command == "build-vocab" else TRAIN),
                "--data",
                w.file("pairs.tsv"),
                "--out",
                f"{w.root}/out",
                "--source-tokenizer",
                "sentencepiece",
                "--source-sentencepiece-model",
                f"{w.root}/{name}" if content is None else w.file(name, content),
            ],
            mentions=("--source-sentencepiece-model", name),
        )
        for command in ("train", "build-vocab")
        for what, name, content in [
            ("a missing file", "missing.model", None),
            ("a file that is not a model", "text.model", b"not a model\n"),
        ]
    ],
]


# Long enough that a SIGTERM sent once the first backup (step 5) exists, or a
# Ctrl-C at step 1, lands before the run ends (each stop is seconds ahead of it).
SMALL_TRAIN = [*TRAIN_TINY, "--train-steps", "20", "--eval-every", "5"]
# Its one run stops at start-up, at step 1 (Ctrl-C, before the first backup), past
# the first backup (SIGTERM) and in the final work, each followed by the same
# command: the signal cases below are asserted there.
SIGNALS_TEST = (
    "tests/training/test_train_signals.py::"
    "test_sigterm_mid_training_then_ctrl_c_in_the_final_work_then_finished"
)

CASES += [
    # operators: concurrent launches, stale locks, signals, remote paths, a full disk
    Case(
        "train on a run directory another train holds (a second launch)",
        lambda w: [
            *SMALL_TRAIN,
            "--data",
            w.file("pairs.tsv", _pair_lines()),
            "--out",
            _lock_held(w, w.root / "run"),
        ],
        mentions=(f"{{{len(SMALL_TRAIN) + 3}}}", "in use by another train", "host"),
    ),
    Case(
        "train on a run directory whose train was SIGKILLed (a stale lock)",
        lambda w: [
            *TRAIN_TWO_STEPS,
            "--data",
            w.file("pairs.tsv", _pair_lines()),
            "--out",
            _lock_held(w, w.root / "run", killed=True),
        ],
        expect=SENSIBLE,
        check=_says("run directory:"),
        slow=True,
    ),
    Case(
        "train SIGTERMed mid-training, then the same command",
        lambda w: _terminated_mid_training(
            w,
            [
                *SMALL_TRAIN,
                "--data",
                w.file("pairs.tsv", _pair_lines()),
                "--out",
                str(w.root / "run"),
            ],
        ),
        expect=SENSIBLE,
        check=_says("run directory:"),
        slow=True,
        checked_in=SIGNALS_TEST,
    ),
    Case(
        "train interrupted (Ctrl-C) before its first backup, then the same command",
        lambda w: _interrupted_before_backup(
            w,
            [
                *SMALL_TRAIN,
                "--save-every",
                "20",
                "--eval-every",
                "20",
                "--log-every",
                "1",
                "--data",
                w.file("pairs.tsv", _pair_lines()),
                "--out",
                str(w.root / "run"),
            ],
        ),
        expect=SENSIBLE,
        check=lambda result: (
            "run directory:" in result.stdout
            and "resuming from step" not in result.stdout
        ),
        slow=True,
        checked_in=SIGNALS_TEST,
    ),
    Case(
        "train --out gs://bucket/run (a remote run directory)",
        lambda w: [
            *TRAIN,
            "--data",
            w.file("pairs.tsv", _pair_lines()),
            "--out",
            "gs://bucket/run",
        ],
        mentions=("gs://bucket/run", "local path"),
    ),
    Case(
        "train --out on a disk that fills up (a 64 KiB tmpfs)",
        lambda w: [
            *TRAIN_TWO_STEPS,
            "--data",
            w.file("pairs.tsv", _pair_lines()),
            "--out",
            str(_small_disk(w) / "run"),
        ],
        mentions=("small-disk/run/", "No space left on device"),
        slow=True,
    ),
]


def _read_only(w):
    """A folder on a read-only tmpfs (needs root; chmod does not stop root)."""
    folder = _small_disk(w, "64k")
    done = subprocess.run(
        ["mount", "-o", "remount,ro", str(folder)], capture_output=True, check=False
    )
    if done.returncode:
        raise Skip(f"cannot remount read-only: {done.stderr.decode().strip()}")
    return folder


def _fifo(w, name):
    """A named pipe (``<(...)`` gives one) in the workspace."""
    path = w.root / name
    os.mkfifo(path)
    return str(path)


def _fed_fifo(w, name, content):
    """A named pipe a process writes ``content`` into (evaluate reads it once)."""
    path = _fifo(w, name)
    writer = subprocess.Popen(
        [sys.executable, "-c", f"open({path!r}, 'wb').write({content!r})"]
    )
    w.cleanups.append(lambda: (writer.kill(), writer.wait()))
    return path


def _bigger_vocabulary(run):
    """source_vocab.txt and tokenizer.json agree (two tokens more), model.keras not."""
    vocab = run / "source_vocab.txt"
    vocab.write_text(vocab.read_text(encoding="utf-8") + "zzz1\nzzz2\n", "utf-8")
    record = json.loads((run / "tokenizer.json").read_text())
    record["source"]["vocab_size"] += 2
    (run / "tokenizer.json").write_text(json.dumps(record))


def _newest_backup(run, suffix):
    return max((run / "backup" / "worker-0").glob(f"epoch-*{suffix}"))


def _truncate_backup(suffix):
    def edit(run):
        path = _newest_backup(run, suffix)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    return edit


def _continue(w, change):
    """``train`` training the trained run longer (a continuation), on a copy with
    ``change`` applied; the options are the tiny run's."""
    copy = w.run_copy("continued", change)
    data = str(w.run.parent / "pairs.tsv")
    return ["train", "--data", data, "--out", copy, "--epochs", "5", *TINY_RUN_ARGS]


CASES += [
    # Pair files before TensorFlow loads, pipes, globs
    Case(
        "train --valid-data a pipe (<(...))",
        lambda w: [
            *TRAIN,
            "--data",
            w.file("pairs.tsv"),
            "--valid-data",
            _fifo(w, "valid"),
            "--out",
            f"{w.root}/run",
        ],
        mentions=("--valid-data", "is a pipe", "more than once"),
    ),
    Case(
        "train --test-data a missing file",
        lambda w: [
            *TRAIN,
            "--data",
            w.file("pairs.tsv"),
            "--test-data",
            f"{w.root}/missing-test.tsv",
            "--out",
            f"{w.root}/run",
        ],
        mentions=("missing-test.tsv", "file not found"),
    ),
    Case(
        "train --data - (stdin)",
        lambda w: [*TRAIN, "--data", "-", "--out", f"{w.root}/run"],
        mentions=("--data", "stdin"),
    ),
    Case(
        "train --data a pattern that matches nothing",
        lambda w: [*TRAIN, "--data", f"{w.root}/no-*.tsv", "--out", f"{w.root}/r"],
        mentions=("no-*.tsv",),
    ),
    Case(
        "build-vocab --data a file whose name holds glob characters",
        lambda w: [
            "build-vocab",
            "--data",
            w.file("pairs[1]*.tsv", _pair_lines(50)),
            "--out",
            f"{w.root}/vocab",
        ],
        expect=SENSIBLE,
        check=_says("source vocabulary"),
        slow=True,
    ),
    Case(
        "train --out a read-only folder",
        lambda w: [
            *TRAIN,
            "--data",
            w.file("pairs.tsv"),
            "--out",
            str(_read_only(w) / "run"),
        ],
        mentions=("small-disk/run", "Read-only file system"),
        slow=True,
    ),
    Case(
        "evaluate --data a pipe (read once)",
        lambda w: [
            "evaluate",
            "--model",
            str(w.run),
            "--data",
            _fed_fifo(w, "pairs", b"14 juillet 1989\t1989-07-14\n"),
            "--json",
        ],
        expect=SENSIBLE,
        check=_says('"count": 1'),
        needs_run=True,
    ),
    # Run parts that disagree, damaged files, full and read-only disks
    Case(
        "translate: vocabulary files that agree with tokenizer.json, not model.keras",
        lambda w: [
            "translate",
            "--model",
            w.run_copy("bigger-vocab", _bigger_vocabulary),
            "x",
        ],
        mentions=("source_vocab.txt", "model.keras", "tokens"),
        needs_run=True,
    ),
    Case(
        "evaluate: config.json's num_hiddens is not model.keras's",
        lambda w: [
            "evaluate",
            "--model",
            w.run_copy(
                "other-width", _edit_config(lambda c: c["model"].update(num_hiddens=64))
            ),
        ],
        mentions=("config.json", "model.keras", "num_hiddens"),
        needs_run=True,
    ),
    Case(
        "train (trained longer): a damaged data.json",
        lambda w: _continue(w, _truncate("data.json")),
        mentions=("data.json: damaged",),
        needs_run=True,
    ),
    Case(
        "train (trained longer): a damaged backup record epoch-N.json",
        lambda w: _continue(w, _truncate_backup(".json")),
        mentions=("backup/worker-0/epoch-", ".json: damaged", "remove"),
        needs_run=True,
    ),
    Case(
        "train (trained longer): a truncated backup weights file",
        lambda w: _continue(w, _truncate_backup(".weights.h5")),
        mentions=(".weights.h5: damaged", "remove"),
        needs_run=True,
    ),
    Case(
        "export --export-dir on a disk that fills up (a 200 KiB tmpfs)",
        lambda w: [
            "export",
            "--model",
            str(w.run),
            "--export-dir",
            str(_small_disk(w, "200k") / "base"),
        ],
        mentions=("small-disk/base", "No space left on device"),
        needs_run=True,
    ),
    Case(
        "export --export-dir a read-only folder",
        lambda w: [
            "export",
            "--model",
            str(w.run),
            "--export-dir",
            str(_read_only(w) / "base"),
        ],
        mentions=("small-disk/base", "Read-only file system"),
        needs_run=True,
    ),
    Case(
        "export --version 7 while another process writes version 7",
        lambda w: [
            "export",
            "--model",
            str(w.run),
            "--export-dir",
            _version_claimed(w, 7),
            "--version",
            "7",
        ],
        mentions=("base/7", "being written by another export", "process "),
        needs_run=True,
    ),
    Case(
        "export --version 7 when version 7 exists",
        lambda w: [
            "export",
            "--model",
            str(w.run),
            "--export-dir",
            str(pathlib.Path(w.file("base/7/saved_model.pb", b"x")).parents[1]),
            "--version",
            "7",
        ],
        mentions=("base/7 exists", "never overwritten"),
        needs_run=True,
    ),
    # Output errors: a full device, a closed stdout, a reader gone away
    Case(
        "translate: stdout on a full device (/dev/full)",
        lambda w: ["translate", "--model", str(w.run), "14 juillet 1989"],
        mentions=("stdout", "No space left on device"),
        stdout="full",
        needs_run=True,
    ),
    Case(
        "translate: stdout closed (>&-)",
        lambda w: ["translate", "--model", str(w.run), "14 juillet 1989"],
        mentions=("stdout is closed",),
        stdout="closed",
        needs_run=True,
    ),
    Case(
        "translate piped to head: the reader went away (a broken pipe)",
        lambda w: ["translate", "--model", str(w.run), "14 juillet 1989"],
        expect=QUIET,
        stdout="broken-pipe",
        needs_run=True,
    ),
    # A tokenizer flag that contradicts the vocabulary; build-vocab's --out unwritable
    Case(
        "train --vocab DIR with a tokenizer flag that contradicts DIR's tokenizer.json",
        lambda w: [
            *TRAIN,
            "--data",
            w.file("pairs.tsv"),
            "--vocab",
            str(pathlib.Path(w.file("vocab/tokenizer.json", _CHAR_TARGETS)).parent),
            "--target-tokenizer",
            "word",
            "--out",
            f"{w.root}/run",
        ],
        mentions=("--target-tokenizer word", "vocab", "target_tokenizer='char'"),
    ),
    Case(
        "build-vocab --out below a file (cannot be created)",
        lambda w: [
            "build-vocab",
            "--data",
            w.file("pairs.tsv"),
            "--out",
            f"{w.file('plain-file')}/vocab",
        ],
        mentions=("--out", "plain-file/vocab", "cannot be written"),
        avoids=("out_dir",),
    ),
]


def classify(case, argv, result):
    """The outcome class of ``result`` for ``case`` (see the module docstring)."""
    if isinstance(result.status, int) and result.status < 0:
        return CRASH
    if "Traceback (most recent call last)" in result.stderr:
        return TRACEBACK
    if result.status == 0:
        return SENSIBLE if case.check and case.check(result) else WRONG
    if result.status == 70:
        return INTERNAL
    if result.status == 141 and not result.stderr.strip():
        return QUIET
    last = result.stderr.strip().splitlines()[-1:] or [""]
    if result.status == 2 and "error:" in last[0]:
        wanted = [m.format(*argv) for m in case.mentions]
        named = all(m in last[0] for m in wanted)
        return (
            CLEAR if named and not any(a in last[0] for a in case.avoids) else UNCLEAR
        )
    return f"exit {result.status}"


class _FaultyStdout(io.StringIO):
    """A stdout whose writes fail as a full device's or a broken pipe's do."""

    def __init__(self, fault):
        super().__init__()
        self.fault = fault

    def write(self, text):
        if self.fault == "broken-pipe":
            raise BrokenPipeError(32, "Broken pipe")
        raise OSError(28, "No space left on device")


def run_in_process(argv, stdin=b"", stdout=None):
    """Runs ``keras_selfattn.cli.main(argv)`` here, capturing what it prints.

    ``stdout``: "full" or "broken-pipe" (writes fail so), "closed" (None, as
    Python has it when fd 1 is closed).
    """
    from keras_selfattn import cli

    out, err = io.StringIO(), io.StringIO()
    if stdout is not None:
        out = None if stdout == "closed" else _FaultyStdout(stdout)
    stdin_stream = None
    if stdin is not None:  # None: closed, as Python has it when fd 0 is closed
        stdin_stream = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        _swapped_stdin(stdin_stream),
    ):
        try:
            status = cli.main(argv)
        except SystemExit as exit_:
            status = exit_.code
        except Exception:  # noqa: BLE001  (what a user would see as a traceback)
            traceback.print_exc(file=err)
            status = 1
    return Result(status, out.getvalue() if out else "", err.getvalue())


@contextlib.contextmanager
def _swapped_stdin(stream):
    saved = sys.stdin
    sys.stdin = stream
    try:
        yield
    finally:
        sys.stdin = saved


def run_in_subprocess(argv, stdin=b"", env=None, stdout=None):
    """Runs ``python -m keras_selfattn ARGV`` (argv bytes as the OS passes them).

    ``stdout``: "full" (/dev/full), "closed" (fd 1 closed), "broken-pipe" (a
    pipe whose reader closed it before the command writes).
    """
    command = [sys.executable, "-m", "keras_selfattn", *map(os.fsencode, argv)]
    if stdout is not None:
        return _faulty_stdout_run(command, stdin, env, stdout)
    if stdin is None:  # fd 0 closed by the shell that execs the command
        command = ["sh", "-c", 'exec "$@" <&-', "sh", *command]
    done = subprocess.run(
        command, input=stdin, capture_output=True, env=env, timeout=600, check=False
    )
    return Result(
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def _faulty_stdout_run(command, stdin, env, fault):
    """`run_in_subprocess` with a faulty stdout (see there)."""
    if fault == "closed":  # fd 1 closed by the shell that execs the command
        command = ["sh", "-c", 'exec "$@" >&-', "sh", *command]
    with contextlib.ExitStack() as stack:
        if fault == "full":
            out = stack.enter_context(open("/dev/full", "wb"))
        else:
            out = subprocess.PIPE if fault == "broken-pipe" else subprocess.DEVNULL
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.PIPE,
            env=env,
        )
        if fault == "broken-pipe":
            process.stdout.close()  # the reader is gone before anything is written
        _, err = process.communicate(stdin, timeout=600)
    return Result(process.returncode, "", err.decode("utf-8", "replace"))


def run_case(case, workspace, runner=run_in_process):
    """Runs one case; returns (outcome class, argv, Result) (``skipped``: argv None)."""
    try:
        try:
            argv = case.argv(workspace)
        except Skip as skip:
            return SKIPPED, None, Result(None, "", str(skip))
        faults = {"stdout": case.stdout} if case.stdout else {}
        result = runner(argv, stdin=case.stdin, **faults)
    finally:
        for cleanup in reversed(workspace.cleanups):
            cleanup()
    return classify(case, argv, result), argv, result
