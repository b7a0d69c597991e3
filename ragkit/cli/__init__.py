"""The ``ragkit`` command line."""
