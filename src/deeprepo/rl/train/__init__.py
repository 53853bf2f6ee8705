"""Training on deeprepo's own episode: SFT warm start and GRPO with TRL (the ``train`` extra, imported lazily)."""
