"""``ragkit serve``: the HTTP service (issue 16)."""
