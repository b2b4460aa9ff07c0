"""Makes ``render_builders`` and ``crd_schemas`` importable from the render tests."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
