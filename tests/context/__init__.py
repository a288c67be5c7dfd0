"""What the model sees (``continuity.context``): compile and its rule, convert and the provider
round trips, compaction and summaries, records, forks. Rendering: ``render/``.
"""
