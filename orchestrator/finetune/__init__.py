"""The fine-tuning evidence (`ggml-patch evidence`), in one place: upstream's own llama-finetune run
with and without the fix on a pre-trained tiny llama model.

results (cases, results model, verdicts, tables, plot), output (llama-finetune's output parsed),
tiny_model (the tiny llama model written with gguf-py), runner (fetch/apply/configure/build through
the cell pipeline, the runs, the result cache), section (summary.md's section), bundle (the
evidence read back for an upstream bundle). Pure, apart from runner and the model file and plot.
"""
