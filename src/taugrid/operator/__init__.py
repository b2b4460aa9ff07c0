"""The TauGrid operator: keeps one cluster's platform objects in shape.

A kopf operator (``python -m taugrid.operator``) for the TauGrid custom resources
(``platform.crds``): a TauTeam becomes a Kueue ClusterQueue (and Cohort), a TauWorkspace
its Namespace, ServiceAccounts, RoleBindings, data PVC and LocalQueue; an approved
TauQuotaRequest changes its team's ClusterQueue. ``desired`` says what should exist
(pure), ``reconcile`` makes it so through the API server, ``handlers`` wires both into
kopf. The hub stays the source of truth for multi-region state.
"""
