"""The frame schema and the chained line codec (``continuity.frames``)."""
