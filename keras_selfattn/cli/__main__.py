"""``python -m keras_selfattn.cli`` runs the ``keras-selfattn`` command (as
``python -m keras_selfattn`` does)."""

import sys

from keras_selfattn.cli import run_program

if __name__ == "__main__":  # importing this module runs nothing
    sys.exit(run_program())
