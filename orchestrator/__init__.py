"""ggml-patch: carry the ggml-opt per-step gradient-accumulation fix into ggml and prove it."""

__version__ = "0.1.0"
