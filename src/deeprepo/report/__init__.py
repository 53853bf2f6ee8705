"""Run outputs: report.md, findings.json, metrics.json, trajectory.jsonl."""
