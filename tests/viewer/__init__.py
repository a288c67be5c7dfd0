"""``continuity serve``: HTTP tests, and a real headless browser (marked ``browser``)."""
