"""The pipeline stages, one module each: load, chunk, extract, merge, index, check."""
