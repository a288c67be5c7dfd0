"""The typed errors (``continuity.errors``): what their messages tell a user to do."""
