"""One attempt as the agent sees it (submit, observe, stop, report), the runtimes it
pre-warms, the guest nodes it lends to spans, and what an ended attempt leaves behind.
"""
