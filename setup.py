"""Installs keras_selfattn. Supported dependency ranges live here, the exact versions of
the reproducible path in constraints.txt; tool settings in pyproject.toml."""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r'^__version__ = "([^"]+)"',
    (HERE / "keras_selfattn" / "version.py").read_text(),
    re.MULTILINE,
).group(1)

setup(
    name="keras-selfattn",
    version=VERSION,
    description=(
        "Serializable Keras 3 attention layers (sinusoidal positions, multi-head "
        "self-attention, Bahdanau decoder) and the path from sentence pairs to "
        "TensorFlow Serving."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10,<3.13",
    packages=find_packages(include=["keras_selfattn", "keras_selfattn.*"]),
    # The packages' root, spelled out (it is the default): with it, setuptools'
    # editable install (`pip install -e .`) puts this folder on sys.path
    # through a plain path line in a .pth file, which type checkers (mypy,
    # pyright) read, instead of an import hook, which they cannot follow: the
    # package's type hints then reach a user's checker from an editable install
    # as from a wheel. (The cost: the checkout's other top-level folders are
    # importable in that environment too, as with `setup.py develop`.)
    package_dir={"": "."},
    # The console script's entry point, beside the package: importing it loads the
    # standard library only, so a signal while Keras loads stops it in one line.
    py_modules=["keras_selfattn_command"],
    # The bundled corpus (keras_selfattn/text/data/ is a data folder, not a package:
    # listed here only, without include_package_data, setuptools does not take it
    # for an undeclared package).
    # py.typed: the package's type hints are part of its API (PEP 561), so a
    # user's type checker reads them.
    package_data={
        "keras_selfattn": ["py.typed"],
        "keras_selfattn.text": ["data/*.tsv"],
    },
    # Ranges, not pins: the package installs beside a user's own stack. The floors
    # and ceilings are the versions scripts/check_versions.sh ran
    # (docs/supported-versions.md); constraints.txt holds the exact set ./run.sh
    # installs.
    install_requires=[
        # tensorflow-text's minor version must equal tensorflow's. The two ranges
        # are the same, and every tensorflow-text release requires tensorflow of
        # its own minor (tensorflow-text 2.M.x: tensorflow>=2.M,<2.M+1), so pip
        # installs a matching pair; a new TensorFlow minor enters the ranges only
        # when its tensorflow-text exists and the check passed.
        "tensorflow>=2.16.1,<2.22",
        "tensorflow-text>=2.16.1,<2.22",
        # 3.9: keras.export.ExportArchive.track() of the tokenizers' lookup
        # tables (3.7 and 3.8 export "an untracked resource" error; 3.7 also
        # brought keras.tree.flatten_with_path). The keras#20585 fix guards its own
        # versions (training/keras_fix.py).
        "keras>=3.9,<4",
        "numpy>=1.26",
        "packaging>=22",
        "sacrebleu>=2.0,<3",
        "babel>=2.12.1",
        # SentencePiece models are learned with it (the "sentencepiece" tokenizer;
        # tensorflow-text applies them in the graph).
        "sentencepiece>=0.2",
    ],
    extras_require={
        "plots": ["matplotlib>=3.8"],
        "serving": ["tensorflow-serving-api>=2.16.1,<2.22"],
        # benchmarks/keras_hub_peer.py: the KerasHub Transformer model measured
        # beside ours on the same data;
        # sacremoses for BLEU as the Multi30k papers compute it. Not in "test":
        # its smoke test is skipped where keras_hub is not installed.
        "peer": ["keras-hub>=0.32,<1", "sacremoses>=0.1"],
        # train writes event files with tf.summary; the viewer reads them (and
        # train writes them only when it is installed: TrainConfig.tensorboard)
        "tensorboard": ["tensorboard>=2.16,<2.22"],
        # The documentation site (mkdocs.yml: docs/ and the API reference that
        # mkdocstrings generates from the docstrings): `./run.sh docs` builds it
        # strict into ./site, `./run.sh lint` strict into a temporary folder.
        "docs": [
            "mkdocs>=1.6,<2",
            "mkdocs-material>=9.5,<10",
            "mkdocstrings-python>=2.0,<3",
        ],
        "test": [
            "pytest>=8",
            # pinned: each ruff release changes its default rules and formatting
            "ruff==0.17.6",
            "pytest-xdist>=3.5",
            "hypothesis>=6.100",
            "jax[cpu]>=0.4.30",
            "matplotlib>=3.8",
            "tensorflow-serving-api>=2.16.1,<2.22",
            "tensorboard>=2.16,<2.22",
            # benchmarks/_bench.paper_bleu (BLEU as the Multi30k papers compute it)
            "sacremoses>=0.1",
            # `./run.sh lint` type-checks the public API (pyproject.toml's
            # [tool.mypy]); its docs build takes the "docs" extra.
            # tests/test_installed_types.py: the hints reach a user's mypy and
            # pyright (pyright's wheel carries its JavaScript and runs on Node.js)
            "mypy>=2.4,<3",
            "pyright>=1.1.400,<2",
            # line coverage of the package, the processes the tests start included
            # (pyproject.toml's [tool.coverage.run]; docs/development.md)
            "coverage>=7.10",
        ],
    },
    entry_points={"console_scripts": ["keras-selfattn=keras_selfattn_command:main"]},
    classifiers=[
        "Programming Language :: Python :: 3.11",
        "Framework :: Keras",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
