"""The orchestration loop (one Episode), its prompts and the code-block parser."""
