"""Randomized fault campaign: ``plan`` draws a trial from a seed,
``campaign`` runs it with real processes and faults, ``oracle`` judges it,
``trials`` runs many; ``scripts/faults.py`` is the command line, docs/faults.md
the results."""
