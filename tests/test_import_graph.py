"""The package's imports go one way: no circle, and none climbs back up.

Every ``import`` and ``from ... import`` of a ``keras_selfattn`` module is read
with `ast`, those inside functions included (a lazy import is an import all the
same), and the graph of the package's modules is checked against `LAYERS`, the
house's order from the bottom up (docs/development.md, "Layout"): a module may
import its own layer and the layers below it, never one above. Two floors: the
library a Keras user imports (layers, text, models, decoding, translation) and,
above it, the application that runs it (run directories, training, inference,
serving, the jobs, the command line), which the library never imports. Import
direction follows the data: text -> model -> training -> inference -> serving ->
command line; what both floors read (the Keras-free configurations, the reserved
ids, the library's file names) sits low.

The package's own ``__init__`` imports the layers and the model's modules (so
that every serializable class is registered at import): it sits above them.
"""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_selfattn"

# From the bottom up; a module belongs to the layer of its longest matching
# prefix (``keras_selfattn.training.fit`` before ``keras_selfattn.training``).
LAYERS = (
    (
        "keras_selfattn.backends",  # imported before Keras loads
        "keras_selfattn.choices",
        "keras_selfattn.file_names",  # the library's saved files, the layout lists
        "keras_selfattn.reserved_ids",
        "keras_selfattn.stopping",  # signals stop a command the same way everywhere
        "keras_selfattn.version",  # read by setup.py and --version, before Keras
    ),
    # The Keras-free configurations (and their checks), which the run directory reads,
    # and the served search's settings, which the searches and the parser read.
    ("keras_selfattn.config", "keras_selfattn.search_settings"),
    # The library floor: what a Keras user imports.
    ("keras_selfattn.layers", "keras_selfattn.text"),
    ("keras_selfattn.models", "keras_selfattn.decoding"),
    # The package itself: the layers and the models, registered at import.
    ("keras_selfattn",),
    # Translating and scoring with a model and its tokenizers (validation during
    # training uses them).
    ("keras_selfattn.translation", "keras_selfattn.scoring"),
    # The application floor: what runs the library.
    ("keras_selfattn.run_directory",),
    ("keras_selfattn.training",),
    ("keras_selfattn.inference",),
    ("keras_selfattn.serving", "keras_selfattn.plotting"),
    # A job's work that reads a run and writes data (the teacher's translations).
    ("keras_selfattn.distillation",),
    ("keras_selfattn.jobs",),
    ("keras_selfattn.cli", "keras_selfattn.__main__"),
)


def package_modules(package=PACKAGE):
    """``{dotted module name: path}`` of every module under ``package``."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _resolve(node, name, modules):
    """The absolute module an ``ImportFrom`` of ``name`` (in module ``name``) is."""
    if not node.level:
        return node.module
    base = name.split(".")
    if modules[name].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(package=PACKAGE):
    """``{module: sorted package modules it imports}``, function bodies included."""
    modules = package_modules(package)
    root = package.name
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == root)
            elif isinstance(node, ast.ImportFrom):
                module = _resolve(node, name, modules)
                if module.split(".")[0] != root:
                    continue
                for alias in node.names:
                    full = f"{module}.{alias.name}"
                    found.add(full if full in modules else module)
        graph[name] = sorted(found - {name})
    return graph


def layer_of(module):
    """The index in `LAYERS` of ``module``'s longest matching prefix."""
    best, best_length = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it")
    return best


def climbs(graph):
    """``"a -> b"`` for every import of a module in a higher layer."""
    return [
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(module)
    ]


def cycles(graph):
    """One cycle (a list of modules, first == last) per circle found, by DFS."""
    found, state, stack = [], {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for target in graph.get(module, ()):
            if state.get(target) == "open":
                found.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_the_graph_is_read_from_every_module():
    graph = import_graph()
    assert "keras_selfattn.run_directory.layout" in graph
    # a trained run is read through the run directory package
    assert "keras_selfattn.run_directory.settings" in graph["keras_selfattn.inference"]


def test_no_import_circle():
    assert cycles(import_graph()) == []


def test_no_import_climbs_back_up():
    assert climbs(import_graph()) == []


def test_the_checks_find_a_circle_and_a_climb():
    graph = {
        "keras_selfattn.text.a": ["keras_selfattn.training.b"],
        "keras_selfattn.training.b": ["keras_selfattn.text.a"],
    }
    assert cycles(graph) == [
        ["keras_selfattn.text.a", "keras_selfattn.training.b", "keras_selfattn.text.a"]
    ]
    assert climbs(graph) == ["keras_selfattn.text.a -> keras_selfattn.training.b"]


# The application floor (docs/development.md, "Layout"): run directories, training,
# reading a trained run, exports, the jobs and the command line. Everything else is
# the library (layers, models, searches, tokenizers, `Translator`) or the base both
# floors stand on (choices, reserved ids, the configurations, the library's file
# names).
APPLICATION = (
    "keras_selfattn.run_directory",
    "keras_selfattn.training",
    "keras_selfattn.inference",
    "keras_selfattn.serving",
    "keras_selfattn.plotting",
    "keras_selfattn.distillation",
    "keras_selfattn.jobs",
    "keras_selfattn.cli",
    "keras_selfattn.__main__",
)


def _in_application(module):
    return any(module == p or module.startswith(p + ".") for p in APPLICATION)


def test_the_library_imports_nothing_of_the_application():
    graph = import_graph()
    found = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not _in_application(module)
        for target in targets
        if _in_application(target)
    ]
    assert found == []


def test_every_module_is_in_a_layer():
    for module in package_modules():
        layer_of(module)
