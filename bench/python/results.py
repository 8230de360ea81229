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
