"""Rendering a context bundle (``continuity.context.render``): API shapes that always validate,
bounded text."""
