"""Findings: the record, normalisation of worker output, CWE data and grading."""
