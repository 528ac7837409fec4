"""MultiHeadSelfAttention vs keras.layers.MultiHeadAttention on JAX and torch (GPU).

Run: KERAS_BACKEND=jax python benchmarks/attention_on_accelerators.py [--quick]
         [--rounds N] [--dtypes float32 mixed_bfloat16] [--large]
     KERAS_BACKEND=torch python benchmarks/attention_on_accelerators.py ...

The TensorFlow backend has its own benchmark (attention_vs_keras.py): there the
layer keeps its three steps. On JAX and torch it runs one
``keras.ops.dot_product_attention`` (its `fused_attention`), as keras' MHA does,
and on a GPU that op can be a fused kernel: cuDNN's flash attention under JAX
(bfloat16/float16 only, keras decides), ``scaled_dot_product_attention``'s flash
or memory-efficient kernels under torch. This script times, on the first device
the backend finds (a GPU where there is one), four contenders on the same input
and weights: "ours" (the layer as it runs), "ours, three steps" (the same layer
forced onto its logits / masked softmax / weighted sum, as on TensorFlow),
"ours, key mask" (the op given the (B, 1, 1, Tk) key mask of a padded batch as
it is, as the layer did before it spelled the mask out as (B, 1, Tq, Tk) on JAX,
which cuDNN requires) and keras' MHA (``mha(X, X)``, the (B, T, T) mask Keras
builds from a padding mask). One step is the forward pass, a mean-square loss in
float32 and the gradients with respect to X and every weight: under ``jax.jit``
on JAX, eager on torch (what a plain ``model.fit`` runs there). The steps run
interleaved in one process (_bench.py); the table gives medians and the median
of the per-round ratios ``ours / keras`` and ``ours / ours, three steps``.

"kernel" names what ran the attention: on JAX, read from the compiled program
(a cuDNN fused-attention custom call, or XLA's own fusions); on torch, the
attention operators the profiler saw (flash, memory-efficient, cuDNN, or the
unfused math path).
"ours - three steps" is the largest difference between the two paths' outputs
in the same run: the fused kernel computes what the three steps do.
"""

import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench

# attention_vs_keras.py's shapes (the issue's), then shapes a GPU is built for.
SHAPES = ((32, 128, 256, 8), (8, 512, 256, 8), (1, 2048, 256, 8))
LARGE_SHAPES = ((32, 512, 512, 8), (8, 2048, 512, 8), (2, 8192, 1024, 16))
QUICK_SHAPES = ((2, 16, 32, 4),)


HEADERS = (
    "(batch, length, width), heads",
    "dtype policy",
    "mask",
    "ours: kernel",
    "ours, key mask: kernel",
    "keras: kernel",
    "ours ms",
    "ours, three steps ms",
    "ours, key mask ms",
    "keras ms",
    "ours / keras",
    "ours / ours, three steps",
    "ours - three steps",
)


def inputs_and_mask(batch, length, width, masked):
    """NumPy X (batch, length, width) and padding mask (or None), as in
    attention_vs_keras.py: every sequence keeps 3/4 of the length or more."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, length, width)).astype("float32")
    mask = None
    if masked:
        lens = rng.integers(length * 3 // 4, length + 1, size=batch)
        lens[0] = length
        mask = np.arange(length)[None, :] < lens[:, None]
    return x, mask


def build_layers(width, num_heads, dtype):
    """Ours, ours on the three steps, ours given the key mask as it is (the
    three with the same weights) and keras' MHA."""
    import keras

    from keras_selfattn.layers import MultiHeadSelfAttention

    class ThreeSteps(MultiHeadSelfAttention):
        """The layer on its three steps, as it runs on TensorFlow."""

        def _fused_attention_applies(self, return_attention_scores, training):
            return False

    class KeyMask(MultiHeadSelfAttention):
        """The op given the (B, 1, 1, Tk) key mask of a padded batch as it is,
        as the layer did before it spelled the mask out on JAX (see
        `MultiHeadSelfAttention.fused_attention`)."""

        def fused_attention(self, query, key, value, attention_mask=None):
            query = query * keras.ops.cast(self.head_size**-0.5, query.dtype)
            return keras.ops.dot_product_attention(
                query, key, value, mask=attention_mask, scale=1.0
            )

    ours = MultiHeadSelfAttention(width, num_heads, use_bias=False, dtype=dtype)
    three = ThreeSteps(width, num_heads, use_bias=False, dtype=dtype)
    key_mask = KeyMask(width, num_heads, use_bias=False, dtype=dtype)
    peer = keras.layers.MultiHeadAttention(
        num_heads, key_dim=width // num_heads, use_bias=False, dtype=dtype
    )
    probe = keras.ops.zeros((1, 4, width))
    ours(probe)
    three(probe)
    key_mask(probe)
    three.set_weights(ours.get_weights())
    key_mask.set_weights(ours.get_weights())
    peer(probe, probe)
    return {
        "ours": ours,
        "ours, three steps": three,
        "ours, key mask": key_mask,
        "keras": peer,
    }


def call_layer(name, layer, x, mask):
    """The layer's self-attention on x, with the mask as each layer takes it."""
    import keras

    if name != "keras":
        return layer(x, mask=mask, training=True)
    if mask is None:
        return layer(x, x, training=True)
    pair = keras.ops.logical_and(mask[:, :, None], mask[:, None, :])
    return layer(x, x, attention_mask=pair, training=True)


def jax_steps(layers, x, mask):
    """name -> (step, kernel, output): jitted forward + backward on JAX."""
    import jax
    import jax.numpy as jnp
    import keras

    x = jnp.asarray(x)
    mask = None if mask is None else jnp.asarray(mask)
    steps = {}
    for name, layer in layers.items():
        trainable = [v.value for v in layer.trainable_variables]
        frozen = [v.value for v in layer.non_trainable_variables]

        def forward(trainable, x, name=name, layer=layer, frozen=frozen):
            mapping = list(zip(layer.trainable_variables, trainable))
            mapping += list(zip(layer.non_trainable_variables, frozen))
            with keras.StatelessScope(state_mapping=mapping):
                return call_layer(name, layer, x, mask)

        def loss(trainable, x, forward=forward):
            return jnp.mean(jnp.square(forward(trainable, x).astype("float32")))

        step = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(trainable, x).compile()
        kernel = "cuDNN fused" if "__cudnn$fmha" in step.as_text() else "XLA"
        output = jax.jit(forward)(trainable, x)

        def run(step=step, trainable=trainable):
            jax.block_until_ready(step(trainable, x))

        steps[name] = (run, kernel, _numpy(output))
    return steps


def torch_steps(layers, x, mask):
    """name -> (step, kernel, output): eager forward + backward on torch."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.tensor(x, device=device, requires_grad=True)
    mask = None if mask is None else torch.tensor(mask, device=device)
    steps = {}
    for name, layer in layers.items():
        weights = [v.value for v in layer.trainable_variables]

        def run(name=name, layer=layer, weights=weights):
            out = call_layer(name, layer, x, mask)
            loss = torch.mean(torch.square(out.float()))
            grads = torch.autograd.grad(loss, [x, *weights])
            if device == "cuda":
                torch.cuda.synchronize()
            return grads

        with torch.no_grad():
            output = call_layer(name, layer, x, mask)
        steps[name] = (run, _torch_kernel(run), _numpy(output))
    return steps


def _torch_kernel(run):
    """Which scaled_dot_product_attention kernel one step ran (profiler names)."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        run()
    names = [event.key for event in prof.key_averages()]
    kernels = [
        name.removeprefix("aten::_")
        for name in names
        if name.startswith("aten::_")
        and "attention" in name
        and "backward" not in name
        and not name.startswith("aten::_scaled_dot_product_attention_math")
    ]
    math = any("attention_math" in name for name in names)
    return ", ".join(sorted(set(kernels))) or ("math (unfused)" if math else "?")


def _numpy(tensor):
    import keras
    import numpy as np

    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32")))


def measure(shape, masked, dtype, rounds, quick):
    """One table row: the three contenders on one shape, mask and dtype."""
    import numpy as np

    batch, length, width, num_heads = shape
    x, mask = inputs_and_mask(batch, length, width, masked)
    layers = build_layers(width, num_heads, dtype)
    make = jax_steps if _backend() == "jax" else torch_steps
    steps = make(layers, x, mask)
    runs = {name: run for name, (run, _, _) in steps.items()}
    calls = 1 if quick else _bench.calls_for(runs["keras"], 0.05)
    samples = _bench.interleaved(runs, rounds, calls)
    ratio = _bench.paired_ratio(samples, "ours", "keras")
    gap = np.max(np.abs(steps["ours"][2] - steps["ours, three steps"][2]))
    return [
        f"({batch}, {length}, {width}), {num_heads} heads",
        dtype,
        "padding" if masked else "none",
        steps["ours"][1],
        steps["ours, key mask"][1],
        steps["keras"][1],
        _bench.ms(_bench.median(samples["ours"])),
        _bench.ms(_bench.median(samples["ours, three steps"])),
        _bench.ms(_bench.median(samples["ours, key mask"])),
        _bench.ms(_bench.median(samples["keras"])),
        f"**{ratio:.2f}**",
        f"{_bench.paired_ratio(samples, 'ours', 'ours, three steps'):.2f}",
        f"{gap:.1e}",
    ]


def _backend():
    import keras

    return keras.backend.backend()


def device_line():
    """The backend, its version and the device the steps ran on."""
    import keras

    if _backend() == "jax":
        import jax

        device = jax.devices()[0]
        where = f"jax {jax.__version__}, {device.platform}: {device.device_kind}"
    else:
        import torch

        gpu = torch.cuda.is_available()
        name = torch.cuda.get_device_name(0) if gpu else platform.processor() or "cpu"
        where = f"torch {torch.__version__}, {'cuda' if gpu else 'cpu'}: {name}"
    return (
        f"python {platform.python_version()}, keras {keras.__version__} "
        f"({_backend()} backend), {where}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="one tiny shape (smoke run)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 5)")
    parser.add_argument(
        "--dtypes",
        nargs="+",
        default=["float32", "mixed_bfloat16"],
        help="dtype policies to run (default: float32 mixed_bfloat16)",
    )
    parser.add_argument(
        "--large", action="store_true", help="also the larger, GPU-sized shapes"
    )
    args = parser.parse_args(argv)
    if _backend() not in ("jax", "torch"):
        parser.error(
            "runs on the jax or torch backend (KERAS_BACKEND=jax|torch); "
            f"received the {_backend()} backend: see attention_vs_keras.py"
        )
    shapes = (
        QUICK_SHAPES if args.quick else SHAPES + (LARGE_SHAPES if args.large else ())
    )
    rounds = args.rounds or (2 if args.quick else 5)
    print()
    print(
        "MultiHeadSelfAttention vs keras.layers.MultiHeadAttention, forward + "
        f"backward, {_backend()} backend:"
    )
    print()
    # Row by row as measured, so that a run stopped early keeps what it measured.
    _bench.print_table(HEADERS, [])
    for dtype in args.dtypes:
        for masked in (False, True):
            for shape in shapes:
                row = measure(shape, masked, dtype, rounds, args.quick)
                print("| " + " | ".join(row) + " |", flush=True)
    print()
    print(f"median of {rounds} interleaved rounds; {device_line()}")
    print(f"command: KERAS_BACKEND={_backend()} {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
