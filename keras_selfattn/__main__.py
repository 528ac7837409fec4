"""``python -m keras_selfattn`` runs the ``keras-selfattn`` command."""

import sys

from keras_selfattn.cli import main

sys.exit(main())
