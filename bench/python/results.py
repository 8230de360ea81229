"""Result files of the Python benchmarks, written to a temporary file in the same folder
and renamed into place, so that a killed run never leaves a partial or mixed file."""
import json
import os
import tempfile


def _replace_with(path, write):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.splitext(path)[1])
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # as open() would create it, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_json(path, obj):
    _replace_with(path, lambda f: f.write(json.dumps(obj, indent=1).encode()))


def save_figure(fig, path, **kw):
    _replace_with(path, lambda f: fig.savefig(f, format=os.path.splitext(path)[1][1:] or "png", **kw))


def log_bar_chart(path, groups, series, *, ylabel, title, rotation=0):
    """A grouped bar chart on a log axis, written to `path` (temp file + rename):
    series maps a label to one value (or None: no bar) per group name. Prints a notice and
    writes nothing without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        bars = [(j + i * width, v) for j, v in enumerate(values) if isinstance(v, float) and v > 0]
        if bars:
            ax.bar([x for x, _ in bars], [v for _, v in bars], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))])
    ax.set_xticklabels(groups, rotation=rotation, ha="right" if rotation else "center")
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    print("wrote", path)
