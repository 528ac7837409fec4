"""keras_selfattn.distillation: a teacher's translations of pair files' sources
as a new pair file, checked against the teacher's own `Translator`, resumed after
crashes and signals, sharded and merged, and its one-line errors.

The teacher is the suite's twelve-step tiny run (tests/training/reference_run.py),
trained once per test run; nothing here trains."""

import dataclasses
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import time

import pytest

from keras_selfattn import text
from keras_selfattn.distillation import merge_shards, record, translate_pairs
from keras_selfattn.inference import load_translator
from keras_selfattn.stopping import Stopped
from tests import forked_commands
from tests.training import reference_run
from tests.training.cluster import REPO

BATCH = 8
PAIRS = 41  # not a multiple of the batch nor of 3 shards


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    data = reference_run.pairs_file(tmp_path_factory)
    return reference_run.twelve_steps(tmp_path_factory, data).run_dir


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """The first PAIRS pairs of the tiny run's data."""
    return text.read_pairs(reference_run.pairs_file(tmp_path_factory))[:PAIRS]


@pytest.fixture(scope="module")
def data(tmp_path_factory, pairs):
    return text.write_pairs(tmp_path_factory.mktemp("data") / "pairs.tsv", pairs)


@pytest.fixture(scope="module")
def translator(teacher, pairs):
    loaded = load_translator(teacher)
    loaded.translate([source for source, _ in pairs[:BATCH]])  # traced here
    return loaded


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory, teacher, data, translator):
    """The bytes of an uninterrupted, unsharded call."""
    out = tmp_path_factory.mktemp("unbroken") / "out.tsv"
    distill(teacher, data, out, translator)
    return out.read_bytes()


def distill(teacher, data, out, translator, **options):
    options = {"batch_size": BATCH, "verbose": False, **options}
    return translate_pairs(teacher, data, out, translator=translator, **options)


class Breaking:
    """A translator that stops the job during its ``calls``-th batch, by
    ``stop()``; otherwise the teacher's."""

    def __init__(self, translator, calls, stop):
        self._translator, self._calls, self._stop = translator, calls, stop

    def __getattr__(self, name):
        return getattr(self._translator, name)

    def translate(self, texts, **options):
        self._calls -= 1
        if self._calls == 0:
            self._stop()
        return self._translator.translate(texts, **options)


class Emptying:
    """The teacher, except that it answers ``empty`` sources with "" and
    ``tabbed`` ones with a tab inside."""

    def __init__(self, translator, empty, tabbed):
        self._translator, self.empty, self.tabbed = translator, empty, tabbed

    def __getattr__(self, name):
        return getattr(self._translator, name)

    def translate(self, texts, **options):
        answers = self._translator.translate(texts, **options)
        for i, answer in enumerate(answers):
            if answer.source in self.empty:
                answers[i] = dataclasses.replace(answer, text="")
            elif answer.source in self.tabbed:
                answers[i] = dataclasses.replace(answer, text="a\tb")
        return answers


def test_the_output_is_the_teachers_own_translations(
    unbroken, pairs, translator, tmp_path
):
    sources = [source for source, _ in pairs]
    # The reference: the Translator itself, on the same batches.
    answers = translator.translate(sources, batch_size=BATCH)
    assert all(answer.text.strip() for answer in answers)
    assert len({answer.text for answer in answers}) > 1  # not one sentence for all
    expected = "".join(f"{a.source}\t{a.text}\n" for a in answers)
    assert unbroken.decode("utf-8") == expected


@pytest.mark.parametrize("kind", ["gz", "glob"])
def test_a_gz_file_and_a_glob_pattern_give_the_same_file(
    teacher, pairs, translator, unbroken, tmp_path, kind
):
    if kind == "gz":
        data = text.write_pairs(tmp_path / "pairs.tsv.gz", pairs)
    else:
        text.write_pairs(tmp_path / "a.tsv", pairs[:20])
        text.write_pairs(tmp_path / "b.tsv", pairs[20:])
        data = str(tmp_path / "*.tsv")  # a then b
    out = tmp_path / "out" / "out.tsv"  # its folder is made
    done = distill(teacher, data, out, translator)
    assert out.read_bytes() == unbroken
    assert (done.pairs, done.written, done.skipped, done.complete) == (
        PAIRS,
        PAIRS,
        0,
        True,
    )


def test_the_same_call_on_a_complete_file_does_nothing(
    teacher, data, translator, unbroken, tmp_path
):
    out = tmp_path / "out.tsv"
    distill(teacher, data, out, translator)
    before = out.stat().st_mtime_ns
    again = distill(teacher, data, out, Breaking(translator, 1, _fail))
    assert again.complete and again.resumed_at == PAIRS
    assert out.stat().st_mtime_ns == before and out.read_bytes() == unbroken


def _fail():
    raise AssertionError("a complete file was translated again")


def _interrupt():
    raise KeyboardInterrupt


def test_a_crash_mid_chunk_resumes_without_a_line_lost_or_twice(
    teacher, data, translator, unbroken, tmp_path
):
    out = tmp_path / "out.tsv"
    with pytest.raises(KeyboardInterrupt):
        distill(teacher, data, out, Breaking(translator, 3, _interrupt))
    stored = record.read_record(out)
    assert (stored.pairs_done, stored.complete) == (2 * BATCH, False)
    assert out.read_bytes() == b"".join(unbroken.splitlines(True)[: 2 * BATCH])
    # As a SIGKILL leaves it: the next chunk half appended, and a record half
    # written under its temporary name.
    with open(out, "ab") as handle:
        handle.write(unbroken.splitlines(True)[2 * BATCH][:7])
    temporary = record.record_path(out).with_name("tmp-out.tsv.progress.json")
    temporary.write_text('{"format": 1, "settings": {"be')
    resumed = distill(teacher, data, out, translator)
    assert resumed.resumed_at == 2 * BATCH and resumed.complete
    assert out.read_bytes() == unbroken


def test_a_stopping_signal_waits_for_the_chunk_and_the_call_resumes(
    teacher, data, translator, unbroken, tmp_path, monkeypatch
):
    """SIGTERM while the second chunk is committed: the chunk is committed
    whole (its record written), then the call stops; the same call resumes."""
    out = tmp_path / "out.tsv"
    write = record.write_record
    calls = []

    def terminated_while_writing(path, stored):
        calls.append(stored.pairs_done)
        if stored.pairs_done == 2 * BATCH:
            os.kill(os.getpid(), signal.SIGTERM)
        write(path, stored)

    monkeypatch.setattr(record, "write_record", terminated_while_writing)
    with pytest.raises(Stopped) as stopped:
        distill(teacher, data, out, translator)
    monkeypatch.undo()
    assert stopped.value.exit_status == 128 + signal.SIGTERM
    assert calls == [0, BATCH, 2 * BATCH]
    assert record.read_record(out).pairs_done == 2 * BATCH
    assert out.read_bytes() == b"".join(unbroken.splitlines(True)[: 2 * BATCH])
    distill(teacher, data, out, translator)
    assert out.read_bytes() == unbroken


def test_another_batch_size_resumes_too(teacher, data, translator, unbroken, tmp_path):
    out = tmp_path / "out.tsv"
    with pytest.raises(KeyboardInterrupt):
        distill(teacher, data, out, Breaking(translator, 2, _interrupt))
    distill(teacher, data, out, translator, batch_size=5)
    assert out.read_bytes() == unbroken


@pytest.fixture(scope="module")
def shard_files(tmp_path_factory, teacher, data, translator):
    """The three shards of the data, complete (read-only: copy before changing)."""
    folder = tmp_path_factory.mktemp("shards")
    for index in range(3):
        distill(teacher, data, folder / f"s{index}.tsv", translator, shard=(index, 3))
    return folder


def _copy_shards(shard_files, tmp_path):
    shutil.copytree(shard_files, tmp_path / "shards")
    return [tmp_path / "shards" / f"s{index}.tsv" for index in range(3)]


def test_shards_merged_equal_the_unsharded_output(shard_files, unbroken, tmp_path):
    shards = _copy_shards(shard_files, tmp_path)
    lines = [len(path.read_bytes().splitlines()) for path in shards]
    assert lines == [14, 14, 13]
    merged = merge_shards(shards[::-1], tmp_path / "merged.tsv", verbose=False)
    assert (tmp_path / "merged.tsv").read_bytes() == unbroken
    assert (merged.pairs, merged.written, merged.complete) == (PAIRS, PAIRS, True)
    # the merged file's record is a complete unsharded call's
    assert record.read_record(tmp_path / "merged.tsv").settings["shard"] is None


def test_a_merged_file_is_what_the_unsharded_call_finds_complete(
    teacher, data, translator, shard_files, unbroken, tmp_path
):
    shards = _copy_shards(shard_files, tmp_path)
    out = tmp_path / "merged.tsv"
    merge_shards(shards, out, verbose=False)
    done = distill(teacher, data, out, Breaking(translator, 1, _fail))
    assert done.complete and out.read_bytes() == unbroken


EMPTY, TABBED = (4, 30), (9,)  # input indexes whose translation is unusable
SKIPPED = [
    "4\tempty translation",
    "9\ttranslation holds a tab or line break",
    "30\tempty translation",
]


def _unusable(translator, pairs):
    return Emptying(
        translator, {pairs[i][0] for i in EMPTY}, {pairs[i][0] for i in TABBED}
    )


def _usable_lines(unbroken):
    lines = unbroken.splitlines(True)
    return b"".join(line for i, line in enumerate(lines) if i not in EMPTY + TABBED)


def test_pairs_whose_translation_is_unusable_are_skipped_and_named(
    teacher, data, pairs, translator, unbroken, tmp_path
):
    out = tmp_path / "out.tsv"
    done = distill(teacher, data, out, _unusable(translator, pairs))
    assert (done.written, done.skipped) == (PAIRS - 3, 3)
    assert out.read_bytes() == _usable_lines(unbroken)
    assert record.skipped_path(out).read_text().splitlines() == SKIPPED


def test_shards_with_skipped_pairs_merge_in_input_order(
    teacher, data, pairs, translator, unbroken, tmp_path
):
    shards = [tmp_path / f"s{index}.tsv" for index in range(2)]
    for index, path in enumerate(shards):
        distill(teacher, data, path, _unusable(translator, pairs), shard=(index, 2))
    merged = merge_shards(shards, tmp_path / "merged.tsv", verbose=False)
    assert (merged.written, merged.skipped) == (PAIRS - 3, 3)
    assert (tmp_path / "merged.tsv").read_bytes() == _usable_lines(unbroken)
    assert record.skipped_path(tmp_path / "merged.tsv").read_text().splitlines() == (
        SKIPPED
    )


def _edit_record(path, change):
    name = record.record_path(path)
    values = json.loads(name.read_text())
    change(values)
    name.write_text(json.dumps(values))


@pytest.mark.parametrize(
    "case, says",
    [
        ("missing", "shard(s) 1 of 3 are missing"),
        ("twice", "are both shard 0"),
        ("incomplete", "is not complete: 10 pairs done"),
        ("other settings", "was made with beam_size=2"),
        ("changed", "it was changed since"),
        ("no record", "no progress record"),
        ("exists", "out must be a new file"),
    ],
)
def test_merge_refuses_shards_that_do_not_make_the_file(
    shard_files, tmp_path, case, says
):
    shards = _copy_shards(shard_files, tmp_path)
    out = tmp_path / "merged.tsv"
    if case == "missing":
        shards = [shards[0], shards[2]]
    elif case == "twice":
        shards = [shards[0], shards[1], shards[2], shards[0]]
    elif case == "incomplete":
        _edit_record(shards[1], lambda r: r.update(complete=False, pairs_done=10))
    elif case == "other settings":
        _edit_record(shards[2], lambda r: r["settings"].update(beam_size=2))
    elif case == "changed":
        with open(shards[1], "ab") as handle:
            handle.write(b"x\ty\n")
    elif case == "no record":
        record.record_path(shards[0]).unlink()
    elif case == "exists":
        out.write_text("")
    with pytest.raises((ValueError, OSError)) as raised:
        merge_shards(shards, out, verbose=False)
    assert says in str(raised.value) and "\n" not in str(raised.value)
    assert not out.exists() or case == "exists"


@pytest.mark.parametrize(
    "change, says",
    [
        (
            {"beam_size": 2},
            "started with beam_size=1 (out.tsv.progress.json), this call "
            + "gives beam_size=2",
        ),
        ({"shard": "0/2"}, "started with shard=None"),
        ({"alpha": 1.0}, "started with alpha=0.6"),
        ({"skip_malformed": True}, "started with skip_malformed=False"),
    ],
)
def test_other_arguments_on_an_existing_output_name_the_stored_value(
    teacher, data, translator, tmp_path, change, says
):
    out = tmp_path / "out.tsv"
    with pytest.raises(KeyboardInterrupt):
        distill(teacher, data, out, Breaking(translator, 2, _interrupt))
    before = out.read_bytes()
    with pytest.raises(ValueError) as raised:
        distill(teacher, data, out, translator, **change)
    assert says in str(raised.value) and "\n" not in str(raised.value)
    assert out.read_bytes() == before


def test_other_data_on_an_existing_output_is_refused(
    teacher, data, pairs, translator, tmp_path
):
    out = tmp_path / "out.tsv"
    distill(teacher, data, out, translator)
    other = text.write_pairs(tmp_path / "pairs.tsv", pairs[:-1])
    with pytest.raises(ValueError, match=r"started with data=\[\{'name': 'pairs"):
        distill(teacher, other, out, translator)


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda t, d: {"teacher_run": t / "no-run"}, "teacher_run must be a trained"),
        (lambda t, d: {"teacher_run": t}, "missing model.keras, config.json"),
        (lambda t, d: {"teacher_run": ""}, "Received: teacher_run=''"),
        (lambda t, d: {"data": t / "none.tsv"}, "(file not found). Received: data="),
        (lambda t, d: {"data": t}, "got a directory"),
        (lambda t, d: {"data": str(t / "*.tsv")}, "matches"),
        (lambda t, d: {"data": _written(t / "e.tsv", b"")}, "the file is empty"),
        (lambda t, d: {"data": _written(t / "c.tsv.gz", _cut_gzip())}, "truncated"),
        (
            lambda t, d: {"out": _written(t / "f", b"x") / "out.tsv"},
            "cannot be written",
        ),
        (lambda t, d: {"out": t / "out.tsv.gz"}, "uncompressed"),
        (lambda t, d: {"out": t}, "out is a directory"),
        (lambda t, d: {"out": ""}, "Received: out=''"),
        (lambda t, d: {"out": d}, "out is one of the data files"),
        (lambda t, d: {"out": _written(t / "o.tsv", b"a\tb\n")}, "no progress record"),
        (lambda t, d: {"shard": "3/2"}, "Received: shard='3/2'"),
        (lambda t, d: {"shard": (-1, 2)}, "Received: shard=(-1, 2)"),
        (lambda t, d: {"shard": "-1/2"}, "Received: shard='-1/2'"),
        (lambda t, d: {"shard": "a/b"}, "Received: shard='a/b'"),
        (lambda t, d: {"shard": (0, 0)}, "Received: shard=(0, 0)"),
        (lambda t, d: {"shard": (0, 2, 1)}, "Received: shard=(0, 2, 1)"),
        (lambda t, d: {"beam_size": 0}, "Received: beam_size=0"),
        (lambda t, d: {"beam_size": -2}, "Received: beam_size=-2"),
        (lambda t, d: {"beam_size": 1.5}, "Received: beam_size=1.5"),
        (lambda t, d: {"batch_size": 0}, "Received: batch_size=0"),
        (lambda t, d: {"alpha": float("nan")}, "Received: alpha=nan"),
        (lambda t, d: {"precision": "float16"}, "Received: precision='float16'"),
        (lambda t, d: {"max_length_ratio": 0}, "Received: max_length_ratio=0"),
        (lambda t, d: {"shortlist": 0}, "Received: shortlist=0"),
        (lambda t, d: {"log_seconds": -1}, "Received: log_seconds=-1"),
    ],
)
def test_each_bad_input_is_one_line_naming_it(
    teacher, data, translator, tmp_path, make, says
):
    arguments = {"teacher_run": teacher, "data": data, "out": tmp_path / "out.tsv"}
    arguments.update(make(tmp_path, data))
    with pytest.raises((ValueError, OSError)) as raised:
        translate_pairs(**arguments, translator=translator, verbose=False)
    message = str(raised.value)
    assert says in message, message
    assert "\n" not in message


def _written(path, content):
    path.write_bytes(content)
    return path


def _cut_gzip():
    whole = gzip.compress("".join(f"{i}\t{i * 7919}\n" for i in range(3000)).encode())
    return whole[: len(whole) // 2]


def test_a_malformed_line_names_its_file_and_line(teacher, translator, tmp_path):
    data = _written(tmp_path / "bad.tsv", b"un\tone\ndeux sans tab\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: no tab character"):
        distill(teacher, data, tmp_path / "out.tsv", translator)


def test_malformed_lines_are_skipped_on_request(teacher, translator, tmp_path):
    data = _written(tmp_path / "bad.tsv", b"un\tone\ndeux sans tab\n")
    done = distill(
        teacher, data, tmp_path / "kept.tsv", translator, skip_malformed=True
    )
    assert (done.pairs, done.written) == (1, 1)


def test_progress_lines_count_pairs_with_a_total_and_an_eta(
    teacher, data, pairs, translator, tmp_path, capsys
):
    out = tmp_path / "out.tsv"
    distill(teacher, data, out, translator, verbose=True, log_seconds=0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{out}: translating {PAIRS} pairs"
    assert lines[1] == f"{out}: {BATCH}/{PAIRS} pairs  ETA --"
    assert " pairs/s  ETA 0:00:0" in lines[2]
    assert lines[-1] == f"{out}: complete: {PAIRS} pairs, {PAIRS} lines written"


def test_progress_lines_without_a_total_count_pairs_per_second(
    teacher, pairs, translator, tmp_path, capsys
):
    """A .gz file's total is not counted (it would cost a decompression)."""
    compressed = text.write_pairs(tmp_path / "pairs.tsv.gz", pairs)
    out = tmp_path / "gz.tsv"
    distill(teacher, compressed, out, translator, verbose=True, log_seconds=0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{out}: translating"
    assert lines[2].startswith(f"{out}: {2 * BATCH} pairs  ") and "ETA" not in lines[2]


@pytest.mark.slow
def test_a_killed_then_terminated_process_resumes_to_the_same_file(
    teacher, reference_pairs_file, translator, tmp_path
):
    """SIGKILL at a random moment of a real process, then SIGTERM at another;
    the same command then ends with the file of an unbroken run (processes forked
    from one that has imported TensorFlow: `tests.forked_commands`)."""
    batch = 4
    expected = tmp_path / "expected.tsv"
    distill(teacher, reference_pairs_file, expected, translator, batch_size=batch)
    out = tmp_path / "out.tsv"
    command = [
        str(REPO / "tests" / "distillation_process.py"),
        str(teacher),
        str(reference_pairs_file),
        str(out),
        str(batch),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    seed = random.randrange(1 << 30)
    draw = random.Random(seed)
    stops = []
    for signum in (signal.SIGKILL, signal.SIGTERM):
        process = forked_commands.Popen(command, env=env, stderr=subprocess.PIPE)
        try:
            _wait_for(out, _pairs_done(out), process)
            time.sleep(draw.uniform(0, 0.3))
            process.send_signal(signum)
            _, stderr = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
        stops.append((signum, process.returncode, _pairs_done(out)))
        assert signum != signal.SIGKILL or process.returncode == -signal.SIGKILL
        assert process.returncode in (-signal.SIGKILL, 143, 0), (seed, stderr[-2000:])
    finished = forked_commands.run(
        command, env=env, capture_output=True, timeout=300, check=False
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert out.read_bytes() == expected.read_bytes(), (seed, stops)
    assert record.read_record(out).complete


@pytest.fixture(scope="module")
def reference_pairs_file(tmp_path_factory):
    return reference_run.pairs_file(tmp_path_factory)


def _pairs_done(out):
    try:
        stored = record.read_record(out)
    except ValueError:
        return 0
    return 0 if stored is None else stored.pairs_done


def _wait_for(out, before, process, timeout=240):
    """Until ``process`` committed a chunk past ``before`` pairs."""
    deadline = time.monotonic() + timeout
    while _pairs_done(out) <= before:
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the process made no progress"
        time.sleep(0.02)


def test_the_command_writes_what_the_function_writes(teacher, data, unbroken, tmp_path):
    """``keras-selfattn distill-data`` in this process: the unbroken call's bytes;
    then ``--shard`` twice and ``merge-shards`` give them again."""
    from tests.bad_input_cases import run_in_process

    base = ["distill-data", "--teacher", str(teacher), "--data", str(data)]
    out = tmp_path / "out.tsv"
    done = run_in_process([*base, "--out", str(out), "--batch-size", str(BATCH)])
    assert done.status == 0, done.stderr
    assert out.read_bytes() == unbroken
    shards = [tmp_path / f"shard{i}.tsv" for i in range(2)]
    for i, shard in enumerate(shards):
        argv = [*base, "--out", str(shard), "--shard", f"{i}/2", "--quiet"]
        assert run_in_process(argv).status == 0
    merged = tmp_path / "merged.tsv"
    done = run_in_process(["merge-shards", "--out", str(merged), *map(str, shards)])
    assert done.status == 0, done.stderr
    assert merged.read_bytes() == unbroken


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--shard", "3/2"], "shard"),
        (["--beam", "0"], "--beam"),
        (["--batch-size", "0"], "batch_size"),
    ],
)
def test_the_command_refuses_bad_input_in_one_line(
    teacher, data, tmp_path, extra, named
):
    from tests.bad_input_cases import run_in_process

    argv = ["distill-data", "--teacher", str(teacher), "--data", str(data)]
    done = run_in_process([*argv, "--out", str(tmp_path / "out.tsv"), *extra])
    assert done.status == 2, (done.status, done.stderr)
    assert done.stderr.count("\n") == 1 and named in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
