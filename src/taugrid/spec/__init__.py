"""tau.yaml: the researcher's spec of one workload (layer 1: pure data and validation).

Modules:
    models    pydantic models of every tau.yaml group (``TauConfig`` is the file)
    rules     cross-field rules the models call (raise ``errors.FieldError``)
    units     quantities (``64Gi``) and durations (``2h``)
    load      YAML text/file → a validated model, or ``errors.SpecError`` with every
              problem at ``file:line:column`` (``load_model`` serves any pydantic model)
    yamlpos   YAML → plain values + the position of every key and value
    messages  pydantic errors → user-facing problems (what, where, how to fix)
    errors    ``Problem``, ``SpecError``, ``FieldError``
    schema    JSON Schema of tau.yaml; writes docs/tau-yaml.md via ``docgen``
    outputs   what ``--artifact`` names: a declared output or a path under artifacts/
    workdir   what tau.yaml names on this machine: ``run.working_dir`` and the
              entrypoint's script (checked by ``tau run`` and ``tau run validate``)

Imports only pydantic, ruamel.yaml, the standard library and ``taugrid.errors``.
"""
