"""Time in the engine (reference §1.10, §1.13.1, §1.14.1): civil days of the configured
timezone (`civil`), fuzzy time expressions (`expressions`), archive-time time tags
(`tags`), memory_recall's time queries (`query`) and the per-session time index
(`index`). Pure and synchronous; time is always an input."""
