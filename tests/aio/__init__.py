"""The async face (``continuity.aio``)."""
