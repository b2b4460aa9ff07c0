"""The agent's data plane: scans, transfers, the data server, peer regions and network
probes.
"""
