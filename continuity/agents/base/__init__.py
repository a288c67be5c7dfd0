"""The foundation every agent adapter builds on."""
