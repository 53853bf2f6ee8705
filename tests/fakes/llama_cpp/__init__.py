"""A stand-in for llama-cpp-python in tests: same server command line, a toy model.

Not the product: tests point ``DEEPREPO_LLAMA_PYTHON`` at a Python with this folder on
``PYTHONPATH`` to check the process lifecycle and the request path without a build.
"""

__version__ = "0.0-fake"
