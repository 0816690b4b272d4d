"""What the runs prove (pure but the plots): outcomes and the control's verdict
(classify), attribution, mutants, competing fixes, training evidence; the
fine-tuning evidence is in orchestrator/finetune/."""
