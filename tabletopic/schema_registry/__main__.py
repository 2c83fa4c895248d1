"""Run the schema registry alone: ``python -m tabletopic.schema_registry --data-dir D -o key=value``.

Used by tests and benches (real HTTP without the rest of the node) and handy next to a Spark
cluster that only needs the registry. ``tabletopic serve`` runs it as a component instead.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path

from tabletopic.cli_common import setup_logging
from tabletopic.config import Config
from tabletopic.http_service import HttpService
from tabletopic.schema_registry import settings
from tabletopic.schema_registry.opening import standalone_app
from tabletopic.settings import LOG_LEVEL


async def run(config: Config) -> None:
    service = HttpService("schema registry", standalone_app(config), config.get(settings.LISTENER))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await service.start()
    print(f"schema registry listening on port {service.port}", flush=True)
    try:
        await stop.wait()
    finally:
        await service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tabletopic.schema_registry")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("-o", "--override", action="append", default=[])
    args = parser.parse_args()
    config = Config.load(config_file=args.config, overrides=args.override, data_dir=args.data_dir)
    setup_logging(config.get(LOG_LEVEL))
    asyncio.run(run(config))


if __name__ == "__main__":
    main()
