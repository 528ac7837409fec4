"""The package's type hints reach a user's type checker from the installed package.

A user's script, in a folder outside the checkout, is checked by the
environment's mypy and pyright against the package as installed there: by
``./run.sh`` an editable install (``pip install -e .``), whose ``.pth`` file must
be a plain path that type checkers read (setup.py's ``package_dir``), not an
import hook that they cannot follow; and as a wheel. Found, the hints give the
class (not ``Any``) and a wrong argument type is reported.
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

USER_SCRIPT = """\
import keras_selfattn.layers

layer = keras_selfattn.layers.PositionalEncoding(num_hiddens=8)
reveal_type(layer)
keras_selfattn.layers.PositionalEncoding(num_hiddens="8")
"""
REVEALED = '"keras_selfattn.layers.positional_encoding.PositionalEncoding"'
WRONG_ARGUMENT = 'Argument "num_hiddens" to "PositionalEncoding" has incompatible type'


def _user_folder(tmp_path):
    """A folder outside the checkout with the script and an empty mypy config
    (so that no configuration of the checkout or the user's home applies)."""
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "script.py").write_text(USER_SCRIPT)
    (folder / "mypy.ini").write_text("[mypy]\n")
    assert REPO not in folder.parents
    return folder


def _check(command, folder):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    return subprocess.run(
        command,
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _run(command):
    """Runs a setup step; its stdout. A failure shows the step's output."""
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _mypy(folder, *options):
    return _check(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "mypy.ini",
            "--cache-dir",
            str(folder / "cache"),
            *options,
            "script.py",
        ],
        folder,
    )


def _assert_mypy_read_the_hints(done):
    out = done.stdout + done.stderr
    assert "import-not-found" not in out and "Cannot find implementation" not in out
    assert f"Revealed type is {REVEALED}" in out, out
    assert WRONG_ARGUMENT in out, out
    assert done.returncode == 1 and "Found 1 error in 1 file" in out, out


@pytest.mark.slow
def test_mypy_reads_the_hints_of_the_editable_install(tmp_path):
    """The install ./run.sh makes: the venv's mypy from outside the checkout."""
    _assert_mypy_read_the_hints(_mypy(_user_folder(tmp_path)))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None, reason="pyright runs on Node.js")
def test_pyright_reads_the_hints_of_the_editable_install(tmp_path):
    folder = _user_folder(tmp_path)
    done = _check(
        [sys.executable, "-m", "pyright", "--pythonpath", sys.executable, "script.py"],
        folder,
    )
    out = done.stdout + done.stderr
    assert 'Type of "layer" is "PositionalEncoding"' in out, out
    assert 'cannot be assigned to parameter "num_hiddens"' in out, out
    assert "reportMissingImports" not in out and done.returncode == 1, out


@pytest.mark.slow
def test_mypy_reads_the_hints_of_the_wheel(tmp_path):
    """The wheel, installed alone in a bare virtual environment whose
    interpreter mypy is pointed at (``--python-executable``): mypy reads its
    site-packages only, where PEP 561 wants the py.typed marker."""
    dist, venv = tmp_path / "dist", tmp_path / "venv"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run([*pip, "wheel", "--no-deps", "-w", str(dist), str(REPO)])
    (wheel,) = dist.glob("keras_selfattn-*.whl")
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    ).strip()
    _run([*pip, "install", "--no-deps", "--target", site, wheel])
    folder = _user_folder(tmp_path)
    done = _mypy(folder, "--python-executable", str(python))
    assert "import-untyped" not in done.stdout, done.stdout
    _assert_mypy_read_the_hints(done)
