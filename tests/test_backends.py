"""Which backend runs: the command line runs itself again on TensorFlow and says so;
a missing backend package is one clear error; the docs say what runs where."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import types

import keras
import pytest

from keras_selfattn import backends, cli
from keras_selfattn.backends import MissingBackendError
from keras_selfattn.cli import commands

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
@pytest.mark.parametrize("module", ["keras_selfattn", "keras_selfattn.layers"])
def test_a_missing_backend_package_is_one_import_error_from_python(module):
    done = run_python(f"import {module}", KERAS_BACKEND="torch")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("keras_selfattn.backends.MissingBackendError:"), last
    assert "needs the torch package" in last and "pip install torch" in last
    assert "KERAS_BACKEND=torch is set" in last
    assert "torchtree_impl" not in done.stderr  # not Keras' own traceback
    # An ImportError, that Python code can catch, naming the package.
    done = run_python(
        f"try:\n    import {module}\nexcept ImportError as e:\n"
        "    print(type(e).__name__, e.name)",
        KERAS_BACKEND="torch",
    )
    assert done.stdout.split() == ["MissingBackendError", "torch"], done.stderr


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
@pytest.mark.parametrize("how", ["python -m", "main()"])
def test_the_command_line_runs_again_on_tensorflow_and_says_so(how, tmp_path):
    model = str(tmp_path / "nothere")
    argv = ["translate", "--model", model, "x"]
    if how == "python -m":
        code = f"import runpy, sys; sys.argv = ['x', *{argv!r}]; "
        code += "runpy.run_module('keras_selfattn', run_name='__main__')"
    else:
        code = (
            "import sys; from keras_selfattn.cli import main; "
            f"sys.argv = ['keras-selfattn', *{argv!r}]; main()"
        )
    done = run_python(code, KERAS_BACKEND="jax")
    lines = done.stderr.strip().splitlines()
    assert lines[0] == (
        "keras-selfattn: the command line runs on TensorFlow, not 'jax': running "
        "it again with KERAS_BACKEND=tensorflow"
    ), lines
    # The command went on under TensorFlow: the run directory's own one-line error.
    assert len(lines) == 2 and lines[1].startswith("keras-selfattn: error: "), lines
    assert model in lines[1]
    assert done.returncode == 2


def test_the_command_line_stays_when_keras_runs_on_tensorflow(monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "tensorflow")
    monkeypatch.setattr(os, "execv", _no_execv)
    commands.use_tensorflow(cli.build_parser(), None)  # returns, nothing else


def test_the_command_runs_again_through_the_console_script_module(monkeypatch, capsys):
    """The second start-up goes through `keras_selfattn_command`, which honours a
    stopping signal while TensorFlow loads; ``python -m keras_selfattn`` would
    import the package first."""
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    monkeypatch.setattr(sys, "argv", ["keras-selfattn", "translate", "--model", "m"])
    monkeypatch.setattr(os, "environ", dict(os.environ))
    ran = []
    monkeypatch.setattr(os, "execv", lambda path, args: ran.append((path, args)))
    commands.use_tensorflow(cli.build_parser(), None)
    assert ran == [
        (
            sys.executable,
            [
                sys.executable,
                "-m",
                "keras_selfattn_command",
                "translate",
                "--model",
                "m",
            ],
        )
    ]
    assert os.environ["KERAS_BACKEND"] == "tensorflow"
    assert "running it again with KERAS_BACKEND=tensorflow" in capsys.readouterr().err


def _no_execv(*args):
    raise AssertionError(f"os.execv{args}")


def test_called_from_python_on_another_backend_is_one_usage_error(monkeypatch, capsys):
    """The caller's process is not replaced: one line naming the backend, exit 2."""
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    monkeypatch.setattr(os, "execv", _no_execv)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["translate", "--model", "nowhere", "x"])
    assert exit_info.value.code == cli.USAGE_ERROR
    err = capsys.readouterr().err
    assert err == (
        "keras-selfattn: error: the command line runs on TensorFlow, but Keras is "
        "loaded with the 'jax' backend in this process; set KERAS_BACKEND=tensorflow\n"
    )


def test_missing_tensorflow_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    monkeypatch.setattr(os, "execv", _no_execv)
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
    assert "pip install tensorflow" in err and "the command line runs on" in err


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


def test_the_command_line_is_told_apart_from_other_programs(monkeypatch):
    """TensorFlow's import lines are dropped for ``keras-selfattn`` and ``python -m
    keras_selfattn`` without --verbose, and for nothing else."""
    cases = {
        (("keras-selfattn", "train"), ("python", "x")): True,
        (("-m", "train"), ("python", "-m", "keras_selfattn", "train")): True,
        (("-m", "x"), ("python", "-m", "keras_selfattn.cli", "x")): True,
        (("-m", "x", "--verbose"), ("python", "-m", "keras_selfattn", "x")): False,
        (("-m", "x", "--debug"), ("python", "-m", "keras_selfattn", "x")): False,
        (("-m", "x"), ("python", "-m", "pytest", "x")): False,
        (("script.py",), ("python", "script.py")): False,
        (("-c",), ("python", "-c", "import keras_selfattn")): False,
    }
    for (argv, orig_argv), expected in cases.items():
        monkeypatch.setattr(sys, "argv", list(argv))
        monkeypatch.setattr(sys, "orig_argv", list(orig_argv))
        assert backends._quiet_command_line() is expected, (argv, orig_argv)


def test_before_keras_loads_the_command_line_chooses_tensorflow(monkeypatch, capsys):
    """The console script chooses before the package loads Keras: one line when
    the user's configuration named another backend, KERAS_BACKEND=tensorflow."""
    monkeypatch.delitem(sys.modules, "keras")  # as before Keras loads
    monkeypatch.setattr(os, "execv", _no_execv)
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    commands.use_tensorflow(cli.build_parser(), None)
    assert os.environ["KERAS_BACKEND"] == "tensorflow"
    assert capsys.readouterr().err == (
        "keras-selfattn: the command line runs on TensorFlow, not 'torch' "
        "(KERAS_BACKEND=torch is set): using TensorFlow\n"
    )
    commands.use_tensorflow(cli.build_parser(), None)  # TensorFlow asked: no line
    assert capsys.readouterr().err == ""


def test_python_m_chooses_tensorflow_as_the_package_loads(monkeypatch, capsys):
    """``python -m keras_selfattn`` imports the package before its command line
    runs: the package's ``__init__`` chooses TensorFlow then, with the same one
    line; a program that only imports the package keeps its backend."""
    monkeypatch.delitem(sys.modules, "keras")  # as before Keras loads
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    monkeypatch.setattr(sys, "argv", ["-m", "train"])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "pytest", "train"])
    backends.choose_command_line_backend()
    assert os.environ["KERAS_BACKEND"] == "torch"
    assert capsys.readouterr().err == ""

    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "keras_selfattn", "train"])
    backends.choose_command_line_backend()
    assert os.environ["KERAS_BACKEND"] == "tensorflow"
    assert capsys.readouterr().err == (
        "keras-selfattn: the command line runs on TensorFlow, not 'torch' "
        "(KERAS_BACKEND=torch is set): using TensorFlow\n"
    )


def test_keras_loads_without_matplotlib_unless_it_is_loaded_already(monkeypatch):
    """In the command line Keras loads with ``import matplotlib`` refused, and
    matplotlib is importable again afterwards; a matplotlib the program loaded
    before is left in place, inside the block and after it."""
    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)
    with backends._matplotlib_hidden(), pytest.raises(ImportError, match="matpl"):
        import matplotlib
    assert "matplotlib" not in sys.modules  # no refusal left behind

    loaded = types.ModuleType("matplotlib")
    monkeypatch.setitem(sys.modules, "matplotlib", loaded)
    with backends._matplotlib_hidden():
        import matplotlib

        assert matplotlib is loaded
    assert sys.modules["matplotlib"] is loaded
