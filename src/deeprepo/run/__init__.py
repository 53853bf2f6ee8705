"""Runs, wired once: the limits, models, metering, budget, cache, ledger, dispatcher and
recorder of a run are built here (``wiring.py``) for ``deeprepo analyze``
(``analyze.py``, continued by ``resume.py``), ``baseline`` (``baseline.py``), and the
research stack's rollouts, benches and judge. ``models.py`` registers the core's built-in
models with the provider registry.
"""
