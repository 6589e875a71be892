"""(package docstring set by its module)."""
