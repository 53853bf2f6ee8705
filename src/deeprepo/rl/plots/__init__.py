"""PNG plots (matplotlib, imported lazily): a bench's cost against quality, a training log's reward and turns against step."""
