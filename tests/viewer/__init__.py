"""``continuity serve``: the web viewer over HTTP (its headless-browser tests are in
``tests/outside/browser/``)."""
