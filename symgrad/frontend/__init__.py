"""The frontend: YAML text to a validated spec whose every value knows its file, line and column."""
