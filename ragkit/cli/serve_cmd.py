"""``ragkit serve``: run the HTTP service (ragkit.server) with uvicorn."""

from __future__ import annotations

import argparse
import logging
import os

from ragkit.errors import ConfigError
from ragkit.settings import load_settings

log = logging.getLogger("ragkit.server")


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        import ragkit.server.app  # noqa: F401  (fastapi, prometheus_client)
    except ImportError as exc:
        raise ConfigError(f"`ragkit serve` needs the server extra ({exc.name} is missing): pip install 'ragkit[server]'") from None
    from ragkit.sections.server import keys_path
    from ragkit.server.keys import KeyStore
    from ragkit.server.perimeter import check_startup

    overrides = {"HOST": args.host, "PORT": args.port, "WORKERS": args.workers,
                 "ALLOW_KEYLESS": "true" if args.allow_keyless else None}
    for name, value in overrides.items():  # the workers load the settings again, from the environment
        if value is not None:
            os.environ[f"RAGKIT_SERVER__{name}"] = str(value)
    if args.config:
        os.environ["RAGKIT_CONFIG"] = str(args.config)
    settings = load_settings(args.config).settings
    server = settings.server
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    check_startup(server, KeyStore(keys_path(settings.working_dir, server)))
    if server.allow_keyless:
        log.warning("keyless mode: loopback clients that send no key have full access to every workspace")
    uvicorn.run(
        "ragkit.server.app:app_from_env", factory=True, host=server.host, port=server.port, workers=server.workers,
        log_level="info",
    )
    return 0
