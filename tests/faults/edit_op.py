"""Child process of the fault campaign: one graph edit through ``RAG``'s API
on the workspace the ``RAGKIT_*`` environment names.

Usage: ``python edit_op.py '["merge_entities", ["Bluepeak Metals"], "Northwind Labs"]'``

Exit status: 0 done; 4 the edit was refused (``GraphEditError``: the entity
does not exist, or already does), with the message on stderr; anything else is
an error of the run (the campaign tells a refusal from a crash by this code).
"""

from __future__ import annotations

import json
import sys

from ragkit.errors import GraphEditError, RagkitError
from ragkit.rag import RAG

REFUSED = 4


def main(spec: str) -> int:
    method, *args = json.loads(spec)
    kwargs = args.pop() if args and isinstance(args[-1], dict) else {}
    try:
        with RAG() as rag:
            getattr(rag, method)(*args, **kwargs)
    except GraphEditError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return REFUSED
    except RagkitError as exc:  # what the CLI does: the message, exit 2
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3 if type(exc).__name__ == "WriterLeaseLostError" else 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
