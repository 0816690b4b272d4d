"""What the runs prove: test outcomes and the control verdict (classify), failure attribution,
mutants (known-wrong fixes) and training evidence. Pure, apart from the training plot."""
