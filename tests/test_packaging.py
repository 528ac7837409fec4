"""setup.py declares ranges; constraints.txt and constraints-oldest.txt pin inside
them."""

import ast
import pathlib

import pytest
import tensorflow as tf
import tensorflow_text
from packaging.requirements import Requirement
from packaging.version import Version

REPO = pathlib.Path(__file__).resolve().parents[1]


def setup_keywords(*names):
    """The literal keyword arguments ``names`` of setup.py's ``setup(...)`` call."""
    tree = ast.parse((REPO / "setup.py").read_text())
    call = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup"
    )
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in names}


def _requirements():
    kwargs = setup_keywords("install_requires", "extras_require")
    install = [Requirement(r) for r in kwargs["install_requires"]]
    extras = [Requirement(r) for rs in kwargs["extras_require"].values() for r in rs]
    return install, extras


def _pins(name):
    pins = {}
    for line in (REPO / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[requirement.name.lower().replace("_", "-")] = Version(spec.version)
    return pins


def _key(requirement):
    return requirement.name.lower().replace("_", "-")


def test_install_requires_are_ranges_not_pins():
    install, extras = _requirements()
    for requirement in install + extras:
        if requirement.name == "ruff":  # a tool whose every release reformats
            continue
        operators = {spec.operator for spec in requirement.specifier}
        assert "==" not in operators and ">=" in operators, str(requirement)


def test_tensorflow_text_ranges_with_tensorflow():
    install, extras = _requirements()
    ranges = {_key(r): r.specifier for r in install + extras}
    assert ranges["tensorflow-text"] == ranges["tensorflow"]
    assert ranges["tensorflow-serving-api"] == ranges["tensorflow"]
    # The environment the tests run in keeps the two minors in step.
    assert (
        Version(tensorflow_text.__version__).release[:2]
        == (Version(tf.__version__).release[:2])
    )


@pytest.mark.parametrize("name", ["constraints.txt", "constraints-oldest.txt"])
def test_the_pinned_sets_are_inside_the_ranges(name):
    pins = _pins(name)
    install, extras = _requirements()
    for requirement in install + extras:
        key = _key(requirement)
        if key in pins:
            assert requirement.specifier.contains(pins[key], prereleases=True), (
                f"{name} pins {key}=={pins[key]} outside setup.py's {requirement}"
            )
    # Each pins every direct dependency.
    missing = {_key(r) for r in install} - set(pins)
    assert not missing, f"{name} does not pin {sorted(missing)}"


def test_the_oldest_set_is_the_floors():
    pins = _pins("constraints-oldest.txt")
    install, extras = _requirements()
    # The install requirements, and the extras the oldest set pins (tensorboard:
    # train writes its events whenever it is installed).
    pinned_extras = [r for r in extras if _key(r) in pins]
    assert "tensorboard" in {_key(r) for r in pinned_extras}
    for requirement in install + pinned_extras:
        (floor,) = (s.version for s in requirement.specifier if s.operator == ">=")
        assert pins[_key(requirement)] == Version(floor), str(requirement)
