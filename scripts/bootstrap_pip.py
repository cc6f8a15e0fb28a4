"""Install pip into a virtualenv created with ``--without-pip``.

Debian's Python lacks ``ensurepip`` unless ``python3-venv`` is installed; this fetches
the current pip wheel from PyPI and installs pip from it (a wheel is importable).
Usage: ``.venv/bin/python scripts/bootstrap_pip.py``.
"""

from __future__ import annotations

import json
import runpy
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path


def main() -> None:
    index = "https://pypi.org/pypi/pip/json"
    with urllib.request.urlopen(index, timeout=60) as response:
        release = json.load(response)
    wheel = next(f for f in release["urls"] if f["filename"].endswith(".whl"))
    target = Path(tempfile.mkdtemp()) / wheel["filename"]
    # Mirrors may answer with relative file URLs.
    urllib.request.urlretrieve(urllib.parse.urljoin(index, wheel["url"]), target)
    sys.path.insert(0, str(target))
    sys.argv = ["pip", "install", "--quiet", str(target)]
    runpy.run_module("pip", run_name="__main__")


if __name__ == "__main__":
    main()
