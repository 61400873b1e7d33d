"""Runnable end-to-end programs: `python -m mirax.examples.NAME`."""
