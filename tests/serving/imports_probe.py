"""Runs ``keras-selfattn ARGS`` (argv[1:]) as the console script does, then prints
on stderr whether matplotlib was imported: ``matplotlib imported: True|False``."""

import runpy
import sys

# argv[0] as the console script's: the command line's own start-up path.
sys.argv = ["keras-selfattn", *sys.argv[1:]]
try:
    runpy.run_module("keras_selfattn", run_name="__main__")
finally:
    print(f"matplotlib imported: {'matplotlib' in sys.modules}", file=sys.__stderr__)
