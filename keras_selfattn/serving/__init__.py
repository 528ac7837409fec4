"""keras_selfattn.serving: from a trained run to a SavedModel that TF Serving serves.

- `export_run(run_dir, export_base, version=None)` (``keras-selfattn export``) writes
  ``export_base/N/``: ``saved_model.pb``, ``variables/``, the vocabulary
  ``assets/`` and ``assets.extra/tf_serving_warmup_requests``, atomically.
  Signatures: ``serving_default`` (``text`` -> ``translation``, ``score``),
  ``translate_nbest`` (``text`` -> ``translations``, ``scores``, [B, K]) and
  ``serve`` (token ids -> logits). See `keras_selfattn.serving.export`.
- `check_serving(path)` (``keras-selfattn check-serving BASE/N``): the op audit
  against stock TF Serving builds (`keras_selfattn.serving.audit`) and a replay of
  the warmup and bad requests under the session-based loader.
- `keras_selfattn.serving.warmup`: the warmup records (tensorflow-serving-api).

Example::

    from keras_selfattn import serving

    version_dir = serving.export_run("runs/demo", "exports/translator")
    check = serving.check_serving(version_dir)
    print(check.summary())
    print(serving.serving_instructions("exports/translator"))

tensorflow-serving-api (the ``serving`` extra) is imported where it is used.
"""

from keras_selfattn.serving.audit import (
    PYTHON_BOUND_OPS,
    TF_TEXT_OPS,
    OpAudit,
    audit_ops,
    audit_saved_model,
    installed_op_registry,
    list_op_types,
    tf_text_version_for_serving,
)
from keras_selfattn.serving.check import ServingCheck, check_serving
from keras_selfattn.serving.export import (
    DEFAULT_BEAM_SIZE,
    DEFAULT_MODEL_NAME,
    NBEST_SIGNATURE,
    SERVING_SIGNATURE,
    TEMP_PREFIX,
    TOKEN_IDS_SIGNATURE,
    build_export_archive,
    export_run,
    export_translator,
    list_versions,
    next_version,
    serving_functions,
    serving_instructions,
)
from keras_selfattn.serving.warmup import (
    WARMUP_FILE,
    bad_request_batches,
    read_warmup_requests,
    write_warmup_requests,
)

__all__ = [
    "DEFAULT_BEAM_SIZE",
    "DEFAULT_MODEL_NAME",
    "NBEST_SIGNATURE",
    "PYTHON_BOUND_OPS",
    "SERVING_SIGNATURE",
    "TEMP_PREFIX",
    "TF_TEXT_OPS",
    "TOKEN_IDS_SIGNATURE",
    "WARMUP_FILE",
    "OpAudit",
    "ServingCheck",
    "audit_ops",
    "audit_saved_model",
    "bad_request_batches",
    "build_export_archive",
    "check_serving",
    "export_run",
    "export_translator",
    "installed_op_registry",
    "list_op_types",
    "list_versions",
    "next_version",
    "read_warmup_requests",
    "serving_functions",
    "serving_instructions",
    "tf_text_version_for_serving",
    "write_warmup_requests",
]
