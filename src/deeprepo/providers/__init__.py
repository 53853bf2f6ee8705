"""Model providers: real SDK adapters, built-in offline models, the metered wrapper,
prices, the usage ledger, budgets and the response cache."""
