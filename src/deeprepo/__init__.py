"""deeprepo: analyse a code repository with the Recursive Language Model pattern.

A root LLM writes Python in a sandboxed REPL that holds the repository as data
and delegates focused reading to cheap sub-LLM workers (``llm_query`` /
``llm_batch``). See ``docs/`` for the user guide and ``docs/decisions.md`` for
the design decisions.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
