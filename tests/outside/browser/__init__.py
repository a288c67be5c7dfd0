"""The viewer (``continuity serve``) in a real headless Chromium, driven by Selenium."""
