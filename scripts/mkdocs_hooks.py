"""mkdocs hooks (mkdocs.yml): links from docs/ to files outside it are reported,
not failed.

The guides link to files of the repository beside docs/ (``../README.md``,
``../benchmarks/RESULTS.md``): they resolve where the Markdown is read (a clone,
the repository's web view) but are not pages of the site. ``mkdocs build
--strict`` would fail on each; this hook logs them at INFO instead. Every other
link problem (a missing page of docs/, an anchor that no heading makes, a
cross-reference of the API reference that resolves to nothing) still fails the
strict build.
"""

import logging
import re

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
