"""Node-level placement inside one cluster: which node (and which GPUs) a task gets.

Modules: ``state`` (per-node free CPU/memory/milli-GPU working state), ``plugins`` (the
``NodeScorer`` protocol and literature baselines), ``fgd`` (fragmentation measure and
FGD), ``default`` (TauGrid's default scorer) and ``packer`` (filter → score → pick →
reserve). Pure: no I/O, no clock; randomness only from explicit seeds.
"""

__all__: list[str] = []
