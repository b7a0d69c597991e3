"""``ragkit keys create|list|revoke``: the HTTP service's API keys (ragkit.server.keys)."""

from __future__ import annotations

import argparse
import json
import sys

from ragkit.core.files import private_dir
from ragkit.errors import ConfigError
from ragkit.sections.server import keys_path
from ragkit.server.keys import KeyStore
from ragkit.settings import load_settings


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config).settings
    store = KeyStore(keys_path(settings.working_dir, settings.server))
    if args.keys_command == "create":
        try:
            key, token = store.create(args.workspaces, args.user, args.groups, args.scope, args.name)
        except ValueError as exc:
            raise ConfigError(f"cannot create the key: {exc}") from None
        for name in key.workspaces:  # a key made for a workspace makes it exist: its reads answer, empty
            if name != "*":
                private_dir(settings.working_dir / name)
        print(token)
        print(f"key {key.id}: {key.scope} on {', '.join(key.workspaces)} as {key.user}"
              f"{' (' + ', '.join(key.groups) + ')' if key.groups else ''}; the token above is shown only once",
              file=sys.stderr)
        return 0
    if args.keys_command == "list":
        keys = store.list()
        if args.json:
            print(json.dumps([k.model_dump(mode="json") for k in keys], indent=2))
            return 0
        for k in keys:
            state = "revoked" if k.revoked else "active"
            print(f"{k.id}  {state:7}  {k.scope:5}  {','.join(k.workspaces):20}  {k.user}  {','.join(k.groups)}  {k.name}")
        if not keys:
            print(f"no keys in {store.path}")
        return 0
    if not store.revoke(args.id):
        raise ConfigError(f"no single key has the id {args.id!r}; `ragkit keys list` shows the ids")
    print(f"revoked {args.id}")
    return 0
