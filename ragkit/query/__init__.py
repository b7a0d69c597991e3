"""The read side: keywords, search, context, answer (one module per stage)."""
