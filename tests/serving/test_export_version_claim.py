"""One writer per export version: a version that exists or that another live
process is writing is refused in one line naming it; the version folder is whole
or absent, and no staging folder or claim is left behind."""

import os
import pathlib
import subprocess
import sys
import time

import pytest

from keras_selfattn.serving import publishing
from tests import forked_commands

REPO = pathlib.Path(__file__).resolve().parents[2]


def cli_process(*args):
    """``keras-selfattn ARGS`` in a process of its own (forked from one that has
    imported TensorFlow: `tests.forked_commands`), output captured."""
    return forked_commands.command(
        list(map(str, args)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )


def left_behind(base):
    """Staging folders and claims left in ``base``."""
    return sorted(
        p.name
        for p in base.iterdir()
        if p.name.startswith((publishing.TEMP_PREFIX, publishing.LOCK_PREFIX))
    )


@pytest.fixture
def live_process():
    """A real process that lives until the test ends."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield process
    process.kill()
    process.wait()


def test_a_version_claimed_by_a_live_process_is_refused(tmp_path, live_process):
    base = tmp_path / "translator"
    base.mkdir()
    (base / f"{publishing.LOCK_PREFIX}7").write_text(f"{live_process.pid}\n")
    with (
        pytest.raises(FileExistsError) as caught,
        publishing.claimed_version(base, 7),
    ):
        pass
    message = str(caught.value)
    assert "\n" not in message
    assert f"{base / '7'} is being written by another export" in message
    assert f"process {live_process.pid}" in message
    with pytest.raises(FileExistsError, match="being written"):
        publishing.resolve_version(base, 7)
    # The live writer's claim stays; an automatic number is not held up by it.
    assert left_behind(base) == [f"{publishing.LOCK_PREFIX}7"]
    with publishing.claimed_version(base) as (version, automatic):
        assert (version, automatic) == (1, True)


@pytest.mark.parametrize("left", ["gone", "0", "-1", "not a number", ""])
def test_a_claim_whose_process_is_gone_is_taken_over(tmp_path, left):
    base = tmp_path / "translator"
    base.mkdir()
    if left == "gone":
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        left = str(gone.pid)
    lock = base / f"{publishing.LOCK_PREFIX}7"
    lock.write_text(f"{left}\n")
    with publishing.claimed_version(base, 7) as (version, automatic):
        assert (version, automatic) == (7, False)
        assert lock.read_text().strip() == str(os.getpid())
    assert left_behind(base) == []


def test_a_version_published_while_waiting_for_the_claim_is_refused(tmp_path):
    base = tmp_path / "translator"
    with publishing.claimed_version(base, 3):
        (base / "3").mkdir()  # another writer published it meanwhile
        staged = base / "staged"
        staged.mkdir()
        with pytest.raises(FileExistsError, match=r"3 exists; versions are never"):
            publishing.publish(staged, base, 3, automatic=False)
    with (
        pytest.raises(FileExistsError, match=r"exists; versions are never"),
        publishing.claimed_version(base, 3),
    ):
        pass
    assert left_behind(base) == []


@pytest.mark.slow
def test_export_of_a_version_being_written_is_refused_before_loading(
    text_run_dir, tmp_path, live_process
):
    base = tmp_path / "translator"
    base.mkdir()
    (base / f"{publishing.LOCK_PREFIX}7").write_text(f"{live_process.pid}\n")
    start = time.monotonic()
    refused = cli_process(
        "export", "--model", text_run_dir, "--export-dir", base, "--version", 7
    )
    _, stderr = refused.communicate(timeout=300)
    assert refused.returncode == 2, stderr
    (line,) = stderr.strip().splitlines()
    assert line.startswith("keras-selfattn: error: "), line
    assert f"{base / '7'} is being written by another export" in line
    assert f"process {live_process.pid}" in line
    assert not (base / "7").exists()
    assert time.monotonic() - start < 120


@pytest.mark.slow
def test_two_exports_of_one_version_at_once(text_run_dir, tmp_path):
    base = tmp_path / "translator"
    args = ("export", "--model", text_run_dir, "--export-dir", base, "--version", 7)
    processes = [cli_process(*args), cli_process(*args)]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in processes]
    for p in processes:
        p.stdout.close()
        p.stderr.close()
    statuses = sorted(status for status, _ in results)
    assert statuses == [0, 2], results
    (refusal,) = [stderr for status, stderr in results if status == 2]
    (line,) = refusal.strip().splitlines()
    assert line.startswith(f"keras-selfattn: error: {base / '7'} "), line
    assert "exists" in line or "being written by another export" in line
    assert (base / "7" / "saved_model.pb").is_file()
    assert (base / "7" / "variables").is_dir()
    assert publishing.list_versions(base) == [7]
    assert left_behind(base) == []
