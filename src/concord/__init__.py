"""concord: consensus-based reasoning with language models (CoRE, FMV, SC-MoA)."""

__version__ = "0.1.0"
