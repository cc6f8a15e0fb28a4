"""The client package's tests import it from its source tree, as its own wheel would install it."""

from __future__ import annotations

import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"
if str(SOURCE) not in sys.path:
    sys.path.insert(0, str(SOURCE))
