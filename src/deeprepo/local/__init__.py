"""Managed local models: llama.cpp's OpenAI-compatible server with GGUF weights.

``deeprepo local setup`` installs the runtime and the weights into the user's data
directory; the ``local/<name>`` provider starts the server when a run needs it and
stops it at the end. See docs/local.md.
"""
