"""The fine-tuning evidence (`ggml-patch evidence`): upstream's own llama-finetune run with and without
the fix on a pre-trained tiny llama model. cases (`--case`), results (command lines, output, the
results model, verdicts, tables, plot), tiny_model, runner (on the cell pipeline), section (of
summary.md), bundle (the evidence read back for an upstream bundle)."""
