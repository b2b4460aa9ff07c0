"""Local multi-region lab: a hub and N regions on one machine (``tau lab up|down``).

- ``net``       network namespaces, veth links and ``tbf`` shaping between regions
- ``topology``  the topology file: regions and links (rate, RTT, egress cost per GB)
- ``lab``       start/stop: hub daemon, per region a real Ray cluster and an agent
                whose data plane and probes live in the region's namespace
- ``__main__``  ``python -m taugrid.lab up|down|status`` (what ``tau lab`` runs)
"""
