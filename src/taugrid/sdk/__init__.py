"""TauGrid's Python SDK: the hub client (``sdk.client``), submission preparation
(``sdk.submit``), the embedded platform (``sdk.embedded``) and the in-job API
(``sdk.injob``, re-exported as ``taugrid.log`` etc.). Nothing heavy is imported here.
"""
