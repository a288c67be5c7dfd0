"""Work on a whole store (``continuity.maintenance``): verify, bulk work in worker processes,
stats, and migrate."""
