"""A local wheelhouse for the tests whose jobs pip-install packages (runtime pre-warm).

Test workers run in network namespaces of their own (tests/workers.py), where PyPI is
out of reach, so pip installs real wheels from a directory instead: the pytest
controller, on the host's network, downloads ``WHEELS`` into ``~/.cache/taugrid/wheels``
once (``fetch``, from ``pytest_configure``), and a Ray cluster started with ``pip_env()``
in its environment has every ``pip install`` read only that directory (``--no-index
--find-links``). A pin that is not there fails as on PyPI: "No matching distribution".
"""

from __future__ import annotations

import subprocess
import sys

from tests.workers import CACHE

WHEELS = ("termcolor==2.4.0", "termcolor==2.3.0")
HOUSE = CACHE / "wheels"


def _present(pin: str) -> bool:
    name, _, version = pin.partition("==")
    return any(HOUSE.glob(f"{name}-{version}-*.whl"))


def fetch() -> None:
    """Download the wheels that are not in the house yet (needs PyPI; quiet when none)."""
    missing = [pin for pin in WHEELS if not _present(pin)]
    if not missing:
        return
    HOUSE.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    for pin in missing:  # one at a time: two versions of one package never resolve together
        res = subprocess.run(
            [*cmd, "-d", str(HOUSE), pin], capture_output=True, text=True, timeout=300
        )
        if res.returncode != 0:
            print(f"tests/wheels.py: no wheel of {pin}: {res.stderr.strip()}", file=sys.stderr)


def pip_env() -> dict[str, str]:
    """Environment that points every pip at the house and nowhere else."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(HOUSE)}
