"""The hub's process-wide state that every part reads: configuration and stores
(context), sealed secrets (vault), the agents' wake-up flag, this replica's leadership,
node pools and prices.
"""
