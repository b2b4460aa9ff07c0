"""What the cluster can do and whether its nodes are healthy: inventory and the node
checker.
"""
