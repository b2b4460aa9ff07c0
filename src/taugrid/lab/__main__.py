"""``python -m taugrid.lab up|down|status``: what ``tau lab`` runs (see ``lab.lab``).

Exit codes: 0 done, 2 a user error (message and hint on stderr), 1 a system fault.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid.lab import lab, topology

__all__ = ["main"]


def _home() -> Path:
    return Path(os.environ.get("TAU_HOME", "~/.tau")).expanduser() / "lab"


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> None:
    the_lab = lab.Lab(args.home)
    if args.cmd == "up":
        if os.geteuid() != 0:
            raise errors.UserError("the lab needs root (network namespaces, tc)", "run it as root")
        st = the_lab.up(topology.load(args.topology, args.regions), _say)
        _show(st, args.output, the_lab)
    elif args.cmd == "down":
        if not the_lab.down(_say):
            _say(f"no lab runs from {args.home}")
    else:
        now = the_lab.state()
        if now is None:
            raise errors.UserError(f"no lab runs from {args.home}", "start one: tau lab up")
        _show(now, args.output, the_lab)


def _show(st: dict[str, Any], output: str, the_lab: lab.Lab) -> None:
    creds = Path(st.get("credentials", the_lab.hub_home / "credentials.json"))
    token = json.loads(creds.read_text())["token"] if creds.exists() else None
    if output == "json":
        print(json.dumps({**st, "tau_home": str(the_lab.hub_home), "token": token}, indent=2))
        return
    print(
        f"lab: {len(st['regions'])} regions ({', '.join(st['regions'])}), hub {st.get('hub_url')}"
    )
    print("tau commands now target the lab (context 'lab'); `tau lab down` goes back")


def main() -> None:
    p = argparse.ArgumentParser(prog="tau lab")
    p.add_argument("cmd", choices=["up", "down", "status"])
    p.add_argument("--regions", type=int, default=None)
    p.add_argument("--topology", type=Path, default=None)
    p.add_argument("--home", type=Path, default=_home())
    p.add_argument("-o", "--output", default="text")
    args = p.parse_args()
    try:
        _run(args)
    except errors.TauError as exc:
        _say(f"error: {exc.message}")
        if exc.hint:
            _say(f"  hint: {exc.hint}")
        sys.exit(1 if isinstance(exc, errors.SystemFault) else 2)


if __name__ == "__main__":
    main()
