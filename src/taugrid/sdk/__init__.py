"""TauGrid's Python SDK: ``client/`` (the hub client and its calls, submission
preparation), ``job/`` (the in-job runtime, re-exported as ``import taugrid as tau``) and
``local/`` (the embedded platform on this machine). Nothing heavy is imported here.
"""
