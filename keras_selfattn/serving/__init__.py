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

from keras_selfattn._lazy import lazy_package

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

__getattr__, __dir__ = lazy_package(
    __name__,
    {
        "PYTHON_BOUND_OPS": "keras_selfattn.serving.audit",
        "TF_TEXT_OPS": "keras_selfattn.serving.audit",
        "OpAudit": "keras_selfattn.serving.audit",
        "audit_ops": "keras_selfattn.serving.audit",
        "audit_saved_model": "keras_selfattn.serving.audit",
        "installed_op_registry": "keras_selfattn.serving.audit",
        "list_op_types": "keras_selfattn.serving.audit",
        "tf_text_version_for_serving": "keras_selfattn.serving.audit",
        "ServingCheck": "keras_selfattn.serving.check",
        "check_serving": "keras_selfattn.serving.check",
        "DEFAULT_BEAM_SIZE": "keras_selfattn.serving.export",
        "DEFAULT_MODEL_NAME": "keras_selfattn.serving.export",
        "NBEST_SIGNATURE": "keras_selfattn.serving.export",
        "SERVING_SIGNATURE": "keras_selfattn.serving.export",
        "TEMP_PREFIX": "keras_selfattn.serving.export",
        "TOKEN_IDS_SIGNATURE": "keras_selfattn.serving.export",
        "build_export_archive": "keras_selfattn.serving.export",
        "export_run": "keras_selfattn.serving.export",
        "export_translator": "keras_selfattn.serving.export",
        "list_versions": "keras_selfattn.serving.export",
        "next_version": "keras_selfattn.serving.export",
        "serving_functions": "keras_selfattn.serving.export",
        "serving_instructions": "keras_selfattn.serving.export",
        "WARMUP_FILE": "keras_selfattn.serving.warmup",
        "bad_request_batches": "keras_selfattn.serving.warmup",
        "read_warmup_requests": "keras_selfattn.serving.warmup",
        "write_warmup_requests": "keras_selfattn.serving.warmup",
    },
    submodules=(
        "audit",
        "check",
        "export",
        "session_replay",
        "warmup",
    ),
)
