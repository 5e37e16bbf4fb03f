"""Hallucination Workbench: evaluate, attribute, fix and gate hallucinations.

Layering (imports point one way): ``app.py`` > ``finetune`` > ``workbench``.
Inside ``workbench``: ``cli`` > commands > core modules (probes, backends, grading, store) > ``types``.
Nothing here imports torch, transformers or gradio at import time.
"""

__version__ = "0.1.0"
