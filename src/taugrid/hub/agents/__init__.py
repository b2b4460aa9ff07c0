"""The agent channel: registration, syncs, what attempt reports mean, and which of their
log text and metric lines are new.
"""
