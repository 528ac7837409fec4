"""Figures with matplotlib (an optional extra: ``pip install keras-selfattn[plots]``).

matplotlib is imported inside each function, so importing the package never needs it.
"""

import importlib.util
import math
import pathlib

import numpy as np

INSTALL = "pip install 'keras-selfattn[plots]'"  # the extra that brings matplotlib


def matplotlib_installed():
    """Whether matplotlib can be imported, found without importing it (so that a
    command can refuse a run that would draw figures before it trains)."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a broken or refused package
        return False


def _pyplot():
    try:
        import matplotlib
    except ImportError as error:  # pragma: no cover - exercised only without the extra
        raise ImportError(f"Plotting needs matplotlib: {INSTALL}") from error
    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def plot_positional_encoding(path, num_hiddens=32, num_steps=60, columns=(6, 7, 8, 9)):
    """Writes the figure of d2l section 11.6.3: sinusoidal table columns by position.

    Two panels: the chosen columns as curves over positions (the book's figure),
    and the whole ``num_steps x num_hiddens`` table as a heatmap.

    Args:
        path: the PNG file to write (parent directories are created).
        num_hiddens: encoding width ``d``.
        num_steps: number of positions.
        columns: the columns drawn as curves.

    Returns:
        The path written, as a ``pathlib.Path``.
    """
    from keras_selfattn.layers.positional_encoding import sinusoidal_table

    for column in columns:
        if not 0 <= column < num_hiddens:
            raise ValueError(
                f"columns must lie in [0, num_hiddens). Received: column={column}, "
                f"num_hiddens={num_hiddens}"
            )
    plt = _pyplot()
    table = sinusoidal_table(num_steps, num_hiddens)
    figure, (curves, heatmap) = plt.subplots(1, 2, figsize=(11, 3.6))
    for column in columns:
        curves.plot(np.arange(num_steps), table[:, column], label=f"Col {column}")
    curves.set_xlabel("Row (position)")
    curves.set_title(f"Columns {', '.join(map(str, columns))} of P")
    curves.legend(loc="lower right", fontsize=8)
    image = heatmap.imshow(table, aspect="auto", cmap="Blues")
    heatmap.set_xlabel("Column (encoding dimension)")
    heatmap.set_ylabel("Row (position)")
    heatmap.set_title(f"P, {num_steps} positions x {num_hiddens} dimensions")
    figure.colorbar(image, ax=heatmap)
    figure.tight_layout()
    return _save(figure, path, plt)


def plot_attention(weights, source_tokens, target_tokens, path, title=None):
    """Writes a heatmap of one sentence's attention: target (rows) x source tokens.

    Args:
        weights: array (S, T) of attention weights (rows sum to 1 over the source).
        source_tokens: the T source token strings (columns).
        target_tokens: the S produced target token strings (rows). The joiner
            mark of glued tokens (U+FFED, `text.tokenizers.JOINER`), which the
            default font lacks, is drawn as "▪" (U+25AA).
        path: the PNG file to write.
        title: optional title (e.g. the source sentence).

    Returns:
        The path written, as a ``pathlib.Path``.
    """
    weights = np.asarray(weights, dtype=np.float32)
    if weights.shape != (len(target_tokens), len(source_tokens)):
        raise ValueError(
            "weights must have shape (len(target_tokens), len(source_tokens)). "
            f"Received: weights.shape={weights.shape}, {len(target_tokens)} target "
            f"tokens, {len(source_tokens)} source tokens"
        )
    source_tokens = [_shown(token) for token in source_tokens]
    target_tokens = [_shown(token) for token in target_tokens]
    plt = _pyplot()
    height = max(2.5, 0.35 * len(target_tokens) + 1.2)
    width = max(3.5, 0.45 * len(source_tokens) + 2.0)
    figure, axis = plt.subplots(figsize=(width, height))
    image = axis.imshow(weights, cmap="Reds", vmin=0.0, vmax=1.0, aspect="auto")
    axis.set_xticks(
        range(len(source_tokens)), source_tokens, rotation=60, ha="right", fontsize=8
    )
    axis.set_yticks(range(len(target_tokens)), target_tokens, fontsize=8)
    axis.set_xlabel("Source (keys)")
    axis.set_ylabel("Target (queries)")
    if title:
        axis.set_title(title, fontsize=9)
    figure.colorbar(image, ax=axis)
    figure.tight_layout()
    return _save(figure, path, plt)


def plot_history(history, path):
    """Writes training and validation loss and accuracy by step.

    Args:
        history: metric name -> values, one a period: ``history.csv``'s columns
            (`history.history_columns`) or a Keras ``History.history``. Its
            ``"step"`` values are the x axis; without them, the periods' numbers
            (from 1, labelled "epoch"). NaN values (a period without validation)
            are left out, so that each line joins the values measured.
        path: the PNG file to write.
    """
    plt = _pyplot()
    steps = history.get("step")
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for axis, metric in zip(axes, ("loss", "accuracy")):
        for prefix in ("", "val_"):
            values = history.get(prefix + metric)
            if values:
                x = steps if steps else range(1, len(values) + 1)
                points = [(a, b) for a, b in zip(x, values) if math.isfinite(b)]
                if points:
                    axis.plot(*zip(*points), marker="o", label=prefix + metric)
        axis.set_xlabel("step" if steps else "epoch")
        axis.set_title(metric)
        if axis.get_lines():
            axis.legend()
        else:
            axis.text(0.5, 0.5, f"no {metric} logged", ha="center", va="center")
    figure.tight_layout()
    return _save(figure, path, plt)


# text.tokenizers.JOINER, not imported from there: that module loads TensorFlow.
_JOINER = "\uffed"


def _shown(token):
    """A token as the default font can draw it: the joiner mark as U+25AA."""
    return str(token).replace(_JOINER, "\u25aa")


def _save(figure, path, plt):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
