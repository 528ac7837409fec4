"""The API reference covers the public API, and the docs build's hooks do what they
say. Cheap checks that read files; the strict build itself (mkdocs.yml: the home
page, the guides of docs/ and the API reference generated from the docstrings) is a
lint step, ``./run.sh lint``, as is mypy."""

import ast
import importlib.util
import logging
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def _load_hooks():
    spec = importlib.util.spec_from_file_location(
        "mkdocs_hooks", REPO / "scripts" / "mkdocs_hooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(message):
    return logging.LogRecord(
        "mkdocs.structure.pages", logging.WARNING, __file__, 1, message, None, None
    )


def test_only_links_that_leave_docs_are_lowered_to_info():
    hook = _load_hooks()._LinksOutsideDocs()
    outside = _record(
        "Doc file 'layers.md' contains a link '../README.md#the-layers', but the "
        "target '../README.md' is not found among documentation files."
    )
    inside = _record(
        "Doc file 'layers.md' contains a link 'positons.md', but the target is "
        "not found among documentation files."
    )
    anchor = _record(
        "Doc file 'data.md' contains a link 'layers.md#nowhere', but the doc "
        "'layers.md' does not contain an anchor '#nowhere'."
    )
    assert hook.filter(outside) and outside.levelno == logging.INFO
    assert hook.filter(inside) and inside.levelno == logging.WARNING
    assert hook.filter(anchor) and anchor.levelno == logging.WARNING


def test_an_args_section_left_unparsed_is_found():
    hooks = _load_hooks()
    parsed = "<p>Parameters:</p><table><tr><td>units</td></tr></table>"
    assert hooks.unparsed_sections(parsed) == []
    assert hooks.unparsed_sections("<p>Args:\n  units: int</p>") == ["Args"]
    # a word that ends in "args", or a code span naming the section, is not one
    assert hooks.unparsed_sections("<p>kwargs: <code>Config.Args: x</code></p>") == []


API = REPO / "docs" / "api"
DIRECTIVE = re.compile(r"^::: ([\w.]+)$", re.MULTILINE)

# The public API the reference documents: module -> names. A module's __all__
# (read from its source, upper-case constants aside) where the whole module is
# public; a few names where the rest is the command line's machinery.
ALL_OF = (
    "keras_selfattn",
    "keras_selfattn.layers",
    "keras_selfattn.inference",
    "keras_selfattn.decoding",
)
NAMES_OF = {
    "keras_selfattn.training": ("train", "TrainConfig", "TrainResult"),
    "keras_selfattn.serving": ("export_run", "export_translator", "check_serving"),
}
# Names of __all__ that are not documented objects: modules, the version, helpers
# of the command line.
NOT_DOCUMENTED = {
    "keras_selfattn": {"__version__", "backends", "layers", "models"},
    "keras_selfattn.inference": {"source_ids_for_model"},
}


def _source(module):
    path = REPO.joinpath(*module.split("."))
    return (path / "__init__.py") if path.is_dir() else path.with_suffix(".py")


def _all(module):
    """``module.__all__``, read from its source without importing it."""
    tree = ast.parse(_source(module).read_text(encoding="utf-8"))
    (names,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(getattr(t, "id", None) == "__all__" for t in node.targets)
    ]
    return names


def _public():
    """``{(module, name)}`` that must each have a ``:::`` entry in docs/api/."""
    public = {(m, n) for m, names in NAMES_OF.items() for n in names}
    for module in ALL_OF:
        skip = NOT_DOCUMENTED.get(module, set())
        public |= {
            (module, name)
            for name in _all(module)
            if name not in skip and not name.isupper()
        }
    return public


def _directives():
    """``{page name: [dotted path of each ::: entry]}`` of docs/api/."""
    return {
        page.stem: DIRECTIVE.findall(page.read_text(encoding="utf-8"))
        for page in sorted(API.glob("*.md"))
    }


def test_the_public_lists_are_read_from_the_sources():
    assert {"MultiHeadSelfAttention", "HashDropout"} <= set(
        _all("keras_selfattn.layers")
    )
    assert ("keras_selfattn", "build_seq2seq") in _public()
    assert ("keras_selfattn.decoding", "greedy_decode") in _public()
    assert not any(name == "__version__" for _, name in _public())


def test_every_public_name_has_a_reference_entry():
    documented = {path.rsplit(".", 1)[1] for p in _directives().values() for path in p}
    missing = sorted(f"{m}.{n}" for m, n in _public() if n not in documented)
    assert not missing, f"no ::: entry in docs/api/*.md for {missing}"


@pytest.mark.parametrize("page", sorted(p.stem for p in API.glob("*.md")))
def test_every_reference_page_is_linked_from_the_home_page_and_the_api_index(page):
    home = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    index = (API / "index.md").read_text(encoding="utf-8")
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert f"api/{page}.md" in nav
    if page != "index":
        assert f"(api/{page}.md)" in home
        assert f"({page}.md)" in index


def test_the_imports_the_pages_show_are_real():
    """Every name of a page's ``from MODULE import ...`` line is in MODULE's
    ``__all__``, and each page but the index opens with one."""
    for page in sorted(API.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        imports = re.findall(r"^from ([\w.]+) import ([\w, ]+)$", text, re.MULTILINE)
        assert imports or page.stem == "index", page.name
        for module, names in imports:
            for name in names.split(","):
                assert name.strip() in _all(module), (page.name, module, name)


def test_readme_names_the_docs_command_and_extra():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "./run.sh docs" in readme and "`docs` extra" in readme
