"""keras_selfattn.serving: from a trained run to a SavedModel that TF Serving serves.

- `export_run(run_dir, export_base, version=None)` (``keras-selfattn export``) writes
  ``export_base/N/``: ``saved_model.pb``, ``variables/``, the vocabulary
  ``assets/`` and ``assets.extra/tf_serving_warmup_requests``, atomically.
  Signatures: ``serving_default`` (``text`` -> ``translation``, ``score``),
  ``translate_nbest`` (``text`` -> ``translations``, ``scores``, [B, K]) and
  ``serve`` (token ids -> logits); each checks its inputs' shapes in the graph.
- `check_serving(path)` (``keras-selfattn check-serving BASE/N``): the op audit
  against stock TF Serving builds (missing ops, I/O ops, the TensorFlow that
  exported it), then a replay of the warmup, bad and malformed requests under the
  session-based loader. It RUNS the model's graph: check models you trust.
- `serving_instructions(export_base, sample_text=...)`: the ``docker run`` and
  ``curl`` lines; `sample_sources(run_dir)` gives sources the model knows.

The modules, one step each: ``signatures`` (the graph code), ``publishing``
(version numbers, atomic rename), ``warmup`` (tensorflow-serving-api records),
``export`` (the steps together), ``instructions``, ``audit``, ``check``.

Example::

    from keras_selfattn import serving

    version_dir = serving.export_run("runs/demo", "exports/translator")
    check = serving.check_serving(version_dir)
    print(check.summary())
    sample = serving.sample_sources("runs/demo", 1)[0]
    print(serving.serving_instructions("exports/translator", sample_text=sample))

tensorflow-serving-api (the ``serving`` extra) is imported where it is used.
"""

from keras_selfattn.serving.audit import OpAudit, audit_saved_model
from keras_selfattn.serving.check import ServingCheck, check_serving
from keras_selfattn.serving.export import export_run, export_translator, sample_sources
from keras_selfattn.serving.instructions import serving_instructions
from keras_selfattn.serving.publishing import DEFAULT_MODEL_NAME
from keras_selfattn.serving.signatures import (
    DEFAULT_BEAM_SIZE,
    DEFAULT_GROUPS,
    NBEST_SIGNATURE,
    SERVING_SIGNATURE,
    TOKEN_IDS_SIGNATURE,
    build_export_archive,
)
from keras_selfattn.serving.warmup import read_warmup_requests

__all__ = [
    "DEFAULT_BEAM_SIZE",
    "DEFAULT_GROUPS",
    "DEFAULT_MODEL_NAME",
    "NBEST_SIGNATURE",
    "SERVING_SIGNATURE",
    "TOKEN_IDS_SIGNATURE",
    "OpAudit",
    "ServingCheck",
    "audit_saved_model",
    "build_export_archive",
    "check_serving",
    "export_run",
    "export_translator",
    "read_warmup_requests",
    "sample_sources",
    "serving_instructions",
]
