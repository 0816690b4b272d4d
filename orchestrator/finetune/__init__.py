"""The training evidence (`ggml-patch evidence`): upstream's own llama-finetune run in the patched
and the control build on a pre-trained tiny llama model. cases (`--case`), commands (command
lines), output (the parser), record (finetune.json, the inputs, the cache key), verdict (noise
floor, verdicts), provenance (which binary holds the fix), markdown and plot (the rendering),
results (all of these for their readers), tiny_model, runner (its step lists on the cell
pipeline), section (of summary.md), bundle (the training evidence read back for a bundle)."""
