"""The command line, command by command, and its misuse."""
