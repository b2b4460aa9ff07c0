"""The in-job runtime: what a training script calls while it runs (re-exported as
``import taugrid as tau``), its roles, and the pipeline driver.
"""
