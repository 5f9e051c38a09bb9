"""pytest plugins that turn pytest into the harness; which ones load is planned in planning.py."""
