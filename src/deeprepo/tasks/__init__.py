"""Tasks with planted bugs and exact ground truth (the generator)."""
