"""One harness every layer goes through (in the spirit of keras-hub's run_layer_test).

``run_layer_test`` checks, for one layer class and one set of inputs:

1. ``get_config`` names every ``__init__`` argument and survives a JSON round trip;
   ``build()`` called explicitly with the inputs' shapes creates every weight (the
   counts are checked when given, and a call adds none);
2. an eager call gives the expected output shapes and is deterministic at inference;
3. a symbolic call inside a functional model with ``None`` batch and lengths gives
   the same values as the eager call;
4. one ``fit`` step runs (with ``jit_compile=True`` too; on JAX, compiled only) and
   changes the weights;
5. ``model.save(.keras)`` then ``keras.saving.load_model(safe_mode=True)`` in another
   Python process, which never ran test code (it only imported ``keras_selfattn``),
   gives identical outputs (on JAX read back in this process: the registration a
   fresh process checks is the same Python on every backend);
6. ``predict`` under ``jit_compile=True`` matches eager (on JAX, step 3's predict
   is that compiled predict already);
7. under ``mixed_float16`` and ``mixed_bfloat16`` (same weights) every sublayer has
   the policy, and the outputs have the compute dtype and stay within the stated
   tolerance of float32.

``run_composition_test`` is the short form of steps 3-5 (in-process load, one
plain fit step) for a composition the test writes itself: every public layer in
a user's functional model in the fast tier, and compositions that are not one
layer call (``BahdanauDecoderCell`` inside ``keras.layers.RNN``).

Inputs are given as an ordered dict: the first entry is the positional input, the
rest are keyword tensor arguments (``memory``, ``valid_lens`` ...). A value may also be
a list of arrays (an RNN cell's ``states``): the model then gets one input per
element, named ``<arg>_<i>``, and the layer receives the list. Outputs may be nested
(a cell's ``(output, [states])``); they are compared flattened. Extra non-tensor
call arguments go in ``call_kwargs``.
"""

import atexit
import inspect
import json
import os
import pathlib
import select
import subprocess
import sys
import tempfile

import keras
import numpy as np
from keras import ops

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def _flatten(outputs):
    return keras.tree.flatten(outputs)


def _to_numpy(outputs):
    return [
        np.asarray(ops.convert_to_numpy(ops.cast(o, "float32")))
        for o in _flatten(outputs)
    ]


def _symbolic_input(name, array):
    """A keras.Input with unknown batch; lengths unknown too (float: all but
    features)."""
    array = np.asarray(array)
    if np.issubdtype(array.dtype, np.floating):
        shape = (
            (None,) * (array.ndim - 2) + (array.shape[-1],) if array.ndim >= 2 else ()
        )
    else:
        shape = (None,) * (array.ndim - 1)
    return keras.Input(shape=shape, dtype=str(array.dtype), name=name)


def jit_compiled(fn):
    """``fn`` compiled with XLA by the backend's own tracer (tf.function or jax.jit).

    Inside it, tensor arguments are symbolic: sizes and values a layer cannot read
    when it is called, only when the compiled function runs.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if backend == "jax":
        import jax

        return jax.jit(fn)
    raise NotImplementedError(f"no jit helper for the {backend} backend")


def check_config(layer_cls, init_kwargs):
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    params = [
        p
        for p in inspect.signature(layer_cls.__init__).parameters
        if p not in ("self", "kwargs")
    ]
    missing = [p for p in params if p not in config]
    assert not missing, f"{layer_cls.__name__}.get_config() lacks {missing}"
    revived = layer_cls.from_config(json.loads(json.dumps(config)))
    assert revived.get_config() == config
    return config


def check_explicit_build(layer_cls, init_kwargs, arrays, groups, names):
    """``build()`` with the inputs' shapes creates every weight; a call adds none.

    The shapes go to ``build`` by name, as Keras passes them: its first argument
    gets the first input's shape, ``<arg>_shape`` the shape of input ``<arg>`` (a
    list of shapes for a list input such as a cell's states).

    Returns the built layer and its weight counts (trainable, non-trainable).
    """
    shapes = {
        k: [arrays[n].shape for n in groups[k]] if k in groups else arrays[k].shape
        for k in names
    }
    params = [p for p in inspect.signature(layer_cls.build).parameters if p != "self"]
    build_args = [shapes[names[0]]]
    for param in params[1:]:
        name = param.removesuffix("_shape")
        if name in shapes:
            build_args.append(shapes[name])
    layer = layer_cls(**init_kwargs)
    layer.build(*build_args)
    assert layer.built
    counts = (len(layer.trainable_weights), len(layer.non_trainable_weights))
    return layer, counts


def check_sublayer_dtype_policies(layer, policy):
    """Every sublayer runs under ``policy`` (Keras does not pass it on by itself)."""
    for sublayer in layer._flatten_layers(include_self=False):
        assert sublayer.dtype_policy.name == policy, (
            f"{layer.name}/{sublayer.name}: {sublayer.dtype_policy.name} under {policy}"
        )


def check_docstring(layer_cls):
    """Every __init__ argument is documented under Args:, and nothing else is."""
    doc = inspect.getdoc(layer_cls) or ""
    assert "Args:" in doc and "Example:" in doc and "References:" in doc, layer_cls
    args_block = doc.split("Args:", 1)[1].split("Call arguments:", 1)[0]
    documented = {
        line.strip().split(":", 1)[0]
        for line in args_block.splitlines()
        if line.startswith("    ") and not line.startswith("        ") and ":" in line
    }
    params = {
        p
        for p in inspect.signature(layer_cls.__init__).parameters
        if p not in ("self", "kwargs")
    }
    assert params <= documented, f"undocumented: {params - documented}"
    assert documented <= params | {"**kwargs"}, (
        f"documented but absent: {documented - params}"
    )


# The loader process: started once per test process (an interpreter start and the
# TensorFlow/JAX imports cost seconds), it loads one .keras file per request line.
# It never runs test code: the layers reach it only through `import keras_selfattn`,
# which is what a user's fresh process has.
_LOAD_SERVER = r"""
import json, sys, traceback
import numpy as np, keras
import keras_selfattn  # registration happens at import
for line in sys.stdin:
    model_path, data_path, out_path = json.loads(line)
    try:
        data = np.load(data_path)
        model = keras.saving.load_model(model_path, safe_mode=True)
        inputs = {k: data[k] for k in data.files}
        # Nested outputs come back flat.
        outs = keras.tree.flatten(model.predict(inputs, verbose=0))
        np.savez(out_path, *[np.asarray(o, dtype="float32") for o in outs])
        print(json.dumps({"ok": True}), flush=True)
    except Exception:
        print(json.dumps({"ok": False, "error": traceback.format_exc()}), flush=True)
"""
_loader = None


def _loader_process():
    global _loader
    if _loader is None or _loader.poll() is not None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])
        )
        env["KERAS_BACKEND"] = keras.backend.backend()
        # Its stderr, read back if it dies: a file without a name, gone with
        # this process.
        log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open with the loader)
        _loader = subprocess.Popen(
            [sys.executable, "-c", _LOAD_SERVER],
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        )
        _loader.log = log
        atexit.register(_loader.kill)
    return _loader


def load_in_fresh_process(model_path, inputs):
    """Loads a .keras file (safe_mode=True) in the loader process and predicts.

    Under JAX in this process instead: what a fresh process adds (the layers
    registered by ``import keras_selfattn`` alone) is Python that runs before any
    backend op, checked under TensorFlow; the JAX run reads the file back with
    JAX, not the start of a second JAX process (seconds, and a compile of each
    model there)."""
    if keras.backend.backend() == "jax":
        model = keras.saving.load_model(model_path, safe_mode=True)
        return _to_numpy(model.predict(dict(inputs), verbose=0))
    with tempfile.TemporaryDirectory() as tmp:
        data_path = os.path.join(tmp, "inputs.npz")
        out_path = os.path.join(tmp, "outputs.npz")
        np.savez(data_path, **inputs)
        loader = _loader_process()
        loader.stdin.write(json.dumps([str(model_path), data_path, out_path]) + "\n")
        loader.stdin.flush()
        if not select.select([loader.stdout], [], [], 300)[0]:
            loader.kill()
            raise AssertionError(
                f"the loader process took over 300 s to load {model_path}"
            )
        reply = loader.stdout.readline()
        if not reply:  # the loader died
            loader.log.seek(0)
            raise AssertionError(loader.log.read().decode("utf-8", "replace")[-4000:])
        reply = json.loads(reply)
        assert reply["ok"], reply.get("error", "")[-4000:]
        loaded = np.load(out_path)
        return [loaded[f"arr_{i}"] for i in range(len(loaded.files))]


def run_layer_test(
    layer_cls,
    init_kwargs,
    inputs,
    expected_output_shapes,
    call_kwargs=None,
    mixed_precision_atol=2e-2,
    run_fresh_process_load=True,
    tmp_path=None,
    expected_num_trainable_weights=None,
    expected_num_non_trainable_weights=0,
):
    """Runs the shared checks; returns the eager float32 outputs as numpy arrays.

    ``expected_num_trainable_weights`` (when given) and
    ``expected_num_non_trainable_weights`` are checked after an explicit
    ``build()``; a call must not add weights to them.
    """
    call_kwargs = dict(call_kwargs or {})
    names = list(inputs)
    first, rest = names[0], names[1:]
    arrays, groups = _flat_arrays(inputs)

    def call(layer, tensors, **extra):
        args = {
            k: [tensors[n] for n in groups[k]] if k in groups else tensors[k]
            for k in names
        }
        return layer(args[first], **{k: args[k] for k in rest}, **call_kwargs, **extra)

    # 1. config
    check_config(layer_cls, init_kwargs)

    # 1b. explicit build: every weight exists before the first call.
    layer, counts = check_explicit_build(layer_cls, init_kwargs, arrays, groups, names)
    if expected_num_trainable_weights is not None:
        assert counts == (
            expected_num_trainable_weights,
            expected_num_non_trainable_weights,
        ), f"(trainable, non-trainable) weights after build(): {counts}"

    # 2. eager call: shapes, determinism at inference; no weight made by the call.
    eager = _to_numpy(call(layer, arrays, training=False))
    assert (
        len(layer.trainable_weights),
        len(layer.non_trainable_weights),
    ) == counts, "the call created weights that build() did not"
    assert [o.shape for o in eager] == [tuple(s) for s in expected_output_shapes], (
        [o.shape for o in eager],
        expected_output_shapes,
    )
    _check_same_and_finite(eager, _to_numpy(call(layer, arrays, training=False)))

    # 3. symbolic call inside a functional model, None batch and lengths.
    symbolic = {k: _symbolic_input(k, v) for k, v in arrays.items()}
    outputs = call(layer, symbolic)
    model = keras.Model(symbolic, outputs)
    predicted = _to_numpy(model.predict(arrays, verbose=0))
    for p, e in zip(predicted, eager):
        np.testing.assert_allclose(p, e, rtol=1e-5, atol=1e-5)

    # 6. XLA inference (on JAX step 3's predict was compiled with XLA already:
    # Keras' "auto" compiles every JAX model).
    if keras.backend.backend() != "jax":
        model.compile(jit_compile=True)
        jitted = _to_numpy(model.predict(arrays, verbose=0))
        for j, e in zip(jitted, eager):
            np.testing.assert_allclose(j, e, rtol=1e-4, atol=1e-4)
    else:
        assert model.jit_compile, "the JAX model's predict was not compiled"

    # 4. fit steps (plain and XLA) move the weights; loss stays finite.
    if layer.trainable_weights:
        train_model = keras.Model(symbolic, _flatten(outputs)[0])
        _check_fit_steps(layer, train_model, arrays, np.zeros_like(eager[0]))
        eager = _to_numpy(call(layer, arrays, training=False))

    # 5. .keras save, safe_mode load in a fresh process.
    if run_fresh_process_load:
        directory = pathlib.Path(tmp_path or tempfile.mkdtemp())
        path = directory / f"{layer_cls.__name__}.keras"
        model.save(path)
        reloaded = load_in_fresh_process(path, arrays)
        assert len(reloaded) == len(eager)
        for r, e in zip(reloaded, eager):
            np.testing.assert_allclose(r, e, rtol=1e-6, atol=1e-6)

    # 7. mixed precision by value, same weights.
    for policy, compute in (
        ("mixed_float16", "float16"),
        ("mixed_bfloat16", "bfloat16"),
    ):
        mixed = layer_cls(**init_kwargs, dtype=policy)
        out = call(mixed, arrays, training=False)
        check_sublayer_dtype_policies(mixed, policy)
        mixed.set_weights(layer.get_weights())
        out = call(mixed, arrays, training=False)
        tolerance = mixed_precision_atol * (4 if compute == "bfloat16" else 1)
        _check_mixed_outputs(out, eager, policy, compute, tolerance)

    return eager


def run_composition_test(compose, inputs, tmp_path, check_rows=True):
    """A public layer in a user's functional model, built on ``keras.Input``s.

    The short check of steps 3-5 above, for the fast tier and for compositions
    that are not one layer call (a cell inside ``keras.layers.RNN``):

    1. ``compose`` is called on one ``keras.Input`` per array of ``inputs``
       (a dict of arrays), with unknown batch, and unknown lengths: every
       dimension but the float inputs' features is None. It returns the
       outputs (nested allowed); ``keras.Model(inputs, outputs)`` is built.
    2. ``predict`` gives finite outputs; with ``check_rows``, predicting on the
       first example alone gives the first row (the batch is really unknown).
    3. One ``fit`` step on the first output (MSE to zeros, SGD) changes the
       model's weights.
    4. ``model.save(.keras)`` then ``keras.saving.load_model(safe_mode=True)``
       gives a model with the same number of weights and the same outputs.

    Returns:
        ``(model, outputs)``: the trained model and its outputs (numpy, flat).
    """
    arrays = {k: np.asarray(v) for k, v in inputs.items()}
    symbolic = {k: _symbolic_input(k, v) for k, v in arrays.items()}
    for tensor in symbolic.values():
        assert all(d is None for d in tensor.shape[: len(tensor.shape) - 1]), (
            tensor.shape
        )
    outputs = compose(symbolic)
    model = keras.Model(symbolic, outputs)

    before = _to_numpy(model.predict(arrays, verbose=0))
    for o in before:
        assert np.all(np.isfinite(o)), "non-finite output"
    if check_rows:
        first = _to_numpy(model.predict({k: v[:1] for k, v in arrays.items()}))
        for f, b in zip(first, before):
            np.testing.assert_allclose(f, b[:1], rtol=1e-5, atol=1e-5)

    train_model = keras.Model(symbolic, _flatten(outputs)[0])
    assert train_model.trainable_weights, "nothing to fit: compose a Dense in"
    _check_fit_steps(model, train_model, arrays, np.zeros_like(before[0]), (False,))

    trained = _to_numpy(model.predict(arrays, verbose=0))
    path = pathlib.Path(tmp_path) / "composed.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert len(loaded.weights) == len(model.weights)
    reloaded = _to_numpy(loaded.predict(arrays, verbose=0))
    assert len(reloaded) == len(trained)
    for r, t in zip(reloaded, trained):
        np.testing.assert_allclose(r, t, rtol=1e-6, atol=1e-6)
    return model, trained


def _check_same_and_finite(eager, again):
    """A second inference call gives the same outputs, all finite."""
    for a, b in zip(eager, again):
        np.testing.assert_array_equal(a, b)
    for o in eager:
        assert np.all(np.isfinite(o)), "non-finite output"


def _flat_arrays(inputs):
    """A flat dict of arrays (what models and .npz files take), and how to regroup it.

    Returns:
        ``(arrays, groups)``: ``groups[k]`` names the arrays of a list input ``k``.
    """
    arrays, groups = {}, {}
    for k, v in inputs.items():
        if isinstance(v, (list, tuple)):
            groups[k] = [f"{k}_{i}" for i in range(len(v))]
            arrays.update({n: np.asarray(a) for n, a in zip(groups[k], v)})
        else:
            arrays[k] = np.asarray(v)
    return arrays, groups


def _check_fit_steps(layer, train_model, arrays, target, jit_modes=(False, True)):
    """A fit step under each of ``jit_modes`` (plain and XLA by default) moves
    ``layer``'s weights (any layer or model), loss finite."""
    # On JAX a step is always compiled in practice; its uncompiled path is slow
    # and unused.
    for jit in (True,) if keras.backend.backend() == "jax" else jit_modes:
        before = [
            w.numpy().copy() if hasattr(w, "numpy") else np.array(w)
            for w in layer.trainable_weights
        ]
        train_model.compile(
            optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=jit
        )
        history = train_model.fit(
            arrays, target, epochs=1, batch_size=len(target), verbose=0
        )
        assert np.isfinite(history.history["loss"][0])
        after = [np.asarray(ops.convert_to_numpy(w)) for w in layer.trainable_weights]
        assert any(not np.allclose(b, a) for b, a in zip(before, after)), (
            "fit did not change the weights"
        )


def _check_mixed_outputs(out, eager, policy, compute, tolerance):
    """The outputs under a mixed policy: its compute dtype, finite, close to float32."""
    first_out = _flatten(out)[0]
    assert keras.backend.standardize_dtype(first_out.dtype) == compute, (
        policy,
        first_out.dtype,
    )
    for m, e in zip(_to_numpy(out), eager):
        assert np.all(np.isfinite(m)), f"non-finite output under {policy}"
        np.testing.assert_allclose(m, e, atol=tolerance, rtol=0, err_msg=policy)
