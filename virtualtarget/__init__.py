"""Command line and local development harness of the virtual-target admission and pool layer."""
