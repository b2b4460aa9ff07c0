"""What placement decides on and the decisions outside the scheduling cycle: the
snapshot (with its data view), relocation and runtime pre-warm hints.
"""
