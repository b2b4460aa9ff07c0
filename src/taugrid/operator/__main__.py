"""``python -m taugrid.operator [--kubeconfig FILE] [--context NAME] [--resync S]``.

Runs the operator (kopf, cluster-wide, standalone: one replica, no peering) until
SIGINT/SIGTERM. Without ``--kubeconfig`` it uses ``$KUBECONFIG``, else (in a pod) its
service account. ``TAU_OPERATOR_RESYNC_S`` sets the default resync interval.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

import kopf

from taugrid import errors
from taugrid.operator import handlers, reconcile


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m taugrid.operator", description=__doc__)
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    p.add_argument("--context", default=None)
    p.add_argument(
        "--resync",
        type=float,
        default=float(os.environ.get("TAU_OPERATOR_RESYNC_S", "30")),
        help="seconds between full passes (drift repair)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    try:
        api = reconcile.api(args.kubeconfig, args.context)
    except errors.UserError as exc:
        print(f"{exc.message}\n  hint: {exc.hint}", file=sys.stderr)
        return 2

    @kopf.on.login(registry=handlers.registry)
    def login(**kw: Any) -> kopf.ConnectionInfo | None:
        if args.kubeconfig:
            return kopf.login_with_kubeconfig(**kw)
        # In a pod: the Kubernetes client's in-cluster login, which finds the API server
        # at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT. kopf's own service-account
        # login names https://kubernetes.default.svc, a name only cluster DNS resolves: a
        # host-network pod, or a cluster whose DNS is down, never reaches the server.
        return kopf.login_via_client(**kw)

    settings = handlers.Settings(reconciler=reconcile.Reconciler(api), resync_s=args.resync)
    try:
        kopf.run(
            registry=handlers.registry,
            clusterwide=True,
            standalone=True,
            memo=kopf.Memo(settings=settings),
        )
    finally:
        api.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
