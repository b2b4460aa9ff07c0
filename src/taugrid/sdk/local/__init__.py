"""The embedded platform on this machine: start, check and stop its hub and agent, and
the supervisor that brings them back.
"""
