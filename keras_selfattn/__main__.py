"""``python -m keras_selfattn`` runs the ``keras-selfattn`` command.

Python imports the package (Keras, TensorFlow) before this module runs, so a
signal during that start-up is not handled here; the console script
(`keras_selfattn_command`, also ``python -m keras_selfattn_command``) handles it.
"""

import sys

from keras_selfattn.cli import run_program

sys.exit(run_program())
