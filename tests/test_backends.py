"""Which backend runs (issue 27 item 1): the command line chooses TensorFlow and says
so; a missing backend package is one clear error; the docs say what runs where."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

from keras_selfattn import backends, cli
from keras_selfattn.backends import MissingBackendError

REPO = pathlib.Path(__file__).resolve().parents[1]


def run_python(code, **env):
    environment = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    environment.update(env, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="has torch")
def test_a_missing_backend_package_is_one_import_error_from_python():
    done = run_python("import keras_selfattn.layers", KERAS_BACKEND="torch")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("keras_selfattn.backends.MissingBackendError:"), last
    assert "needs the torch package" in last and "pip install torch" in last
    assert "KERAS_BACKEND=torch is set" in last
    assert "torchtree_impl" not in done.stderr  # not Keras' own traceback
    # An ImportError, that Python code can catch, naming the package.
    done = run_python(
        "try:\n    import keras_selfattn.layers\nexcept ImportError as e:\n"
        "    print(type(e).__name__, e.name)",
        KERAS_BACKEND="torch",
    )
    assert done.stdout.split() == ["MissingBackendError", "torch"], done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_command_line_uses_tensorflow_and_says_so_in_one_line(backend, tmp_path):
    model = str(tmp_path / "nothere")
    code = (
        "import sys; from keras_selfattn.cli import main; "
        f"sys.argv = ['keras-selfattn', 'translate', '--model', {model!r}, 'x']; "
        "main()"
    )
    done = run_python(code, KERAS_BACKEND=backend)
    lines = done.stderr.strip().splitlines()
    assert lines[0] == (
        f"keras-selfattn: using the TensorFlow backend (KERAS_BACKEND={backend} is "
        "set; the command line needs TensorFlow)"
    )
    # The command went on under TensorFlow: the run directory's own one-line error.
    assert len(lines) == 2 and lines[1].startswith("keras-selfattn: error: "), lines
    assert model in lines[1]
    assert done.returncode == 2


def test_the_command_line_says_nothing_when_tensorflow_is_asked_for(monkeypatch):
    monkeypatch.setattr(backends, "configured_backend", lambda: ("tensorflow", "x"))
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    assert backends.use_tensorflow_backend() is None


def test_missing_tensorflow_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    monkeypatch.setattr(backends, "configured_backend", lambda: ("jax", "why"))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tensorflow" else real_find_spec(name, *a),
    )
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["translate", "--model", "nowhere", "x"])
    assert exit_info.value.code == cli.USAGE_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("keras-selfattn: error: the Keras backend 'tensorflow' needs")
    assert (
        "pip install tensorflow" in err and "the command line needs TensorFlow" in err
    )


def test_the_command_line_refuses_keras_loaded_with_another_backend(monkeypatch):
    monkeypatch.setattr(
        backends, "configured_backend", lambda: ("jax", "Keras is already loaded")
    )
    with pytest.raises(backends.WrongBackendError, match="already loaded with 'jax'"):
        backends.use_tensorflow_backend()


def test_configured_backend_reads_the_environment_then_keras_json(
    monkeypatch, tmp_path
):
    monkeypatch.delitem(sys.modules, "keras")  # as before Keras loads
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert backends.configured_backend() == ("jax", "KERAS_BACKEND=jax is set")
    monkeypatch.delenv("KERAS_BACKEND")
    assert backends.configured_backend() == ("tensorflow", "the default")
    (tmp_path / "keras.json").write_text('{"backend": "torch"}')
    name, reason = backends.configured_backend()
    assert name == "torch" and "keras.json" in reason
    if importlib.util.find_spec("torch") is None:
        with pytest.raises(MissingBackendError, match="keras.json"):
            backends.check_backend()


def test_the_docs_say_what_runs_on_which_backend():
    """docs/layers.md's table is `backends.WHAT_RUNS_WHERE`; the README points to it."""
    page = (REPO / "docs" / "layers.md").read_text(encoding="utf-8")
    section = page.split("## Backends", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (.+?) \| (.+?) \|$", section, re.MULTILINE)
    table = {what: tuple(where.split(", ")) for what, where in rows[1:]}
    assert table == backends.WHAT_RUNS_WHERE
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "docs/layers.md#backends" in readme
    assert (
        "greedy and beam search, `Translator` and `evaluate` run on TensorFlow and "
        "on JAX" in readme
    )
    assert "the command line switches to it itself" in readme
