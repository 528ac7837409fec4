"""Commands import what their job needs: translate, evaluate, export and
check-serving draw nothing and never import matplotlib (Keras' own import would
load it), so a read-only HOME gives no matplotlib cache warnings."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PROBE = pathlib.Path(__file__).with_name("imports_probe.py")


def run_command(*args, home=None):
    """``keras-selfattn ARGS`` in a fresh process; (the finished process, whether
    it imported matplotlib)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("MPLCONFIGDIR", None)
    if home is not None:
        env["HOME"] = str(home)
    result = subprocess.run(
        [sys.executable, str(PROBE), *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    marker = result.stderr.strip().splitlines()[-1]
    assert marker.startswith("matplotlib imported: "), result.stderr[-2000:]
    return result, marker.endswith("True")


def test_the_probe_sees_matplotlib_where_it_is_imported():
    # The independent reference: matplotlib, once imported, is in sys.modules.
    code = "import sys, matplotlib; print('matplotlib' in sys.modules)"
    seen = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert seen.stdout.strip() == "True"


@pytest.mark.slow
def test_commands_import_no_matplotlib_and_are_quiet_with_a_read_only_home(
    text_run_dir, core_export, tmp_path
):
    """translate, evaluate, export and check-serving, one after the other in one
    process whose HOME is read-only: none imports matplotlib and none warns
    about it (its cache folder)."""
    test_pairs = pathlib.Path(text_run_dir) / "splits" / "test.tsv"
    commands = [
        ("translate", "--model", text_run_dir, "14 juillet 1989"),
        ("evaluate", "--model", text_run_dir, "--data", test_pairs),
        ("export", "--model", text_run_dir, "--export-dir", tmp_path / "base"),
        ("check-serving", core_export),
    ]
    # One process runs them in turn (one TensorFlow start-up, not four): imports
    # only accumulate, so the line after each command shows whether it, or one
    # before it, imported matplotlib.
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    env = dict(os.environ, PYTHONPATH=str(REPO), HOME=str(home))
    env.pop("MPLCONFIGDIR", None)
    each = json.dumps([[str(arg) for arg in command] for command in commands])
    try:
        result = subprocess.run(
            [sys.executable, str(PROBE), "--each", each],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    finally:
        home.chmod(0o755)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [
        line for line in result.stderr.splitlines() if "matplotlib imported:" in line
    ]
    assert lines == ["exit 0 matplotlib imported: False"] * len(commands), (
        result.stderr[-3000:]
    )
    assert "matplotlib" not in result.stderr.replace("matplotlib imported: False", "")
