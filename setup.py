"""Installs keras_selfattn. Dependency pins live here; tool settings in pyproject.toml."""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r'^__version__ = "([^"]+)"',
    (HERE / "keras_selfattn" / "__init__.py").read_text(),
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
    # The bundled corpus (keras_selfattn/text/data/ is a data folder, not a package:
    # listed here only, without include_package_data, setuptools does not take it
    # for an undeclared package).
    package_data={"keras_selfattn.text": ["data/*.tsv"]},
    install_requires=[
        # tensorflow-text's minor version must equal tensorflow's.
        "tensorflow==2.21.0",
        "tensorflow-text==2.21.1",
        "keras==3.15.1",
        "numpy>=1.26",
        "sacrebleu==2.6.0",
        "babel==2.19.0",
    ],
    extras_require={
        "plots": ["matplotlib>=3.8"],
        "serving": ["tensorflow-serving-api==2.21.0"],
        "test": [
            "pytest>=8",
            # pinned: each ruff release changes its default rules and formatting
            "ruff==0.17.6",
            "pytest-xdist>=3.5",
            "hypothesis>=6.100",
            "jax[cpu]>=0.4.30",
            "matplotlib>=3.8",
            "tensorflow-serving-api==2.21.0",
        ],
    },
    entry_points={"console_scripts": ["keras-selfattn=keras_selfattn.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3.11",
        "Framework :: Keras",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
