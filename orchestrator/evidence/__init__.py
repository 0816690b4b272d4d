"""What the runs prove: test outcomes and the control verdict (classify), failure attribution,
mutants (known-wrong fixes) and training evidence (training: the linear-regression program;
finetune and tiny_model: llama.cpp's own training path). Pure, apart from the plots and the model file."""
