"""mkdocs hooks (mkdocs.yml): links from docs/ to files outside it are reported,
not failed; an API reference page with a docstring section left unparsed fails.

The guides link to files of the repository beside docs/ (``../README.md``,
``../benchmarks/RESULTS.md``): they resolve where the Markdown is read (a clone,
the repository's web view) but are not pages of the site. ``mkdocs build
--strict`` would fail on each; this hook logs them at INFO instead. Every other
link problem (a missing page of docs/, an anchor that no heading makes, a
cross-reference of the API reference that resolves to nothing) still fails the
strict build.

mkdocstrings renders a Google-style ``Args:`` section as a parameters table; a
section it did not recognise (misindented, misspelt) stays in the page as its
``Args:`` line, which this hook reports as a warning, so the strict build fails.
"""

import html
import logging
import re

log = logging.getLogger("mkdocs.hooks.api_reference")

# mkdocs' message for a link whose target is not among the documentation files.
_LEAVES_DOCS = re.compile(r"contains a link '\.\./[^']*', but the target")


class _LinksOutsideDocs(logging.Filter):
    """Lowers the not-found warning of a link that leaves docs/ to INFO."""

    def filter(self, record):
        if record.levelno == logging.WARNING and _LEAVES_DOCS.search(
            record.getMessage()
        ):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def on_startup(command, dirty):
    """Installs the filter on the logger of mkdocs' link validation."""
    logger = logging.getLogger("mkdocs.structure.pages")
    if not any(isinstance(f, _LinksOutsideDocs) for f in logger.filters):
        logger.addFilter(_LinksOutsideDocs())


# A docstring's "Args:" line as the page shows it: mkdocstrings made no table of it.
_UNPARSED_ARGS = re.compile(r"(?<![\w.])(Args|Arguments):(?=\s)")


def unparsed_sections(page_html):
    """The ``Args:`` titles left in the visible text of an HTML page."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", page_html))
    return _UNPARSED_ARGS.findall(text)


def on_page_content(page_html, page, config, files):
    """Warns (a failure under ``--strict``) on an API page that shows an ``Args:``."""
    if page.file.src_uri.startswith("api/") and unparsed_sections(page_html):
        log.warning(
            "%s: a docstring's Args: section was not parsed into a table",
            page.file.src_uri,
        )
    return page_html
