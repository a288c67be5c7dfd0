"""What the model sees: compile and its rule, render and convert, compaction and summaries,
records, forks.
"""
