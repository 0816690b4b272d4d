"""What the runs prove: test outcomes and the control verdict (classify), failure attribution,
mutants (known-wrong fixes) and training evidence (training: the linear-regression program).
Pure, apart from the plots. The fine-tuning evidence lives in orchestrator/finetune/."""
