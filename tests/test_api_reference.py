"""The documentation site builds strict: the guides of docs/ and the API reference
generated from the docstrings (mkdocs.yml, docs/api/)."""

import html
import importlib.util
import logging
import os
import pathlib
import re
import subprocess
import sys

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


def _text(page):
    """The visible text of an HTML page, whitespace collapsed."""
    text = re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))
    return re.sub(r"\s+", " ", html.unescape(text))


@pytest.mark.slow
def test_the_site_builds_strict_with_the_api_reference(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Every guide of docs/ is a page of the site.
    for guide in (REPO / "docs").glob("*.md"):
        assert (site / guide.stem / "index.html").is_file(), guide.name
    # The API reference holds each public object, with its signature's types.
    pages = {
        "layers": (
            "PositionalEncoding",
            "LearnedPositionalEncoding",
            "MultiHeadSelfAttention",
            "BahdanauAttention",
            "BahdanauDecoderCell",
            "BahdanauDecoder",
        ),
        "model": ("build_seq2seq", "ModelConfig"),
        "translator": ("Translator", "Translation"),
        "jobs": ("train", "evaluate", "export_run"),
        "decoding": ("greedy_decode", "beam_search_decode"),
    }
    for name, objects in pages.items():
        page = site / "api" / name / "index.html"
        source = page.read_text(encoding="utf-8")
        for obj in objects:
            assert re.search(rf'id="[\w.]*\b{obj}"', source), (name, obj)
    # Google style: "Args:" became a parameters table (name, type, description,
    # default), "Returns:" its own section, "Call arguments:" a titled block.
    layers = _text(site / "api" / "layers" / "index.html")
    assert "Parameters: Name Type Description Default" in layers
    assert (
        "num_hiddens int int, the feature size d ; the input's last dimension "
        "must equal it. required"
    ) in layers
    assert "Call arguments inputs: float tensor (batch, T, num_hiddens)" in layers
    assert "Args:" not in layers
    translator = _text(site / "api" / "translator" / "index.html")
    assert "beam_size int 1 for greedy search, more for beam search. 1" in translator
    assert "Returns: Type Description list [ Translation ] list of" in translator
