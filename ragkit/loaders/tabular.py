"""CSV and TSV (the standard library): rows as text, each with its column headers."""

from __future__ import annotations

import csv
import io

from ragkit.loaders.base import Loaded, Loader, LoaderError, TextBuilder
from ragkit.loaders.office import row_blocks
from ragkit.loaders.text import decode


class CsvLoader(Loader):
    name = "csv"
    description = "CSV/TSV tables: rows as text with the headers repeated (standard library)"
    extensions = (".csv", ".tsv")
    media_types = ("text/csv", "text/tab-separated-values")

    def load(self, data: bytes, name: str) -> Loaded:
        decoded = decode(data)
        if decoded.binary:
            raise LoaderError(f"binary file: {decoded.binary}; a CSV file is text")
        delimiter = "\t" if name.lower().endswith(".tsv") else ","
        try:
            delimiter = csv.Sniffer().sniff(decoded.text[:4096], delimiters=",;\t|").delimiter
        except csv.Error:
            pass  # one column, or too irregular to guess: the extension's delimiter
        rows = list(csv.reader(io.StringIO(decoded.text), delimiter=delimiter))
        builder = TextBuilder()
        for piece in row_blocks(rows):
            builder.add(piece)
        if builder.empty:
            raise LoaderError("the table has no values")
        return Loaded(builder.text(), [], "page", None)
