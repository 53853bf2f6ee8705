"""Run outputs: report.md, findings.json, findings.sarif, metrics.json, trajectory.jsonl."""
