"""The hub as a process: the ASGI app, the daemon, the scheduling loop and the leader's
loop.
"""
