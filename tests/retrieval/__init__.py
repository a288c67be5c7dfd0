"""Search: terms and stems, the per-thread and store-wide indexes, ranking, vectors and fusion,
leads, quality.
"""
