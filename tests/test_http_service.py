"""The HTTP listener shared by the admin API, the schema registry and the REST catalog."""

from __future__ import annotations

import asyncio
import socket
import ssl
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tabletopic.broker.security.http_auth import https_options
from tabletopic.config import Config
from tabletopic.http_service import HttpService, bind_socket
from tests.support.tls_certs import TestCA


def test_accepted_connections_have_nagle_off() -> None:
    """With Nagle's algorithm on, a response written as headers then body waits for the client's
    delayed ACK: every keep-alive request took 40 ms. asyncio turns it off on accepted connections
    only for sockets created with proto IPPROTO_TCP."""

    async def run() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        listener = bind_socket("probe", "127.0.0.1", 0, None)
        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        async with server:
            port = listener.getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                return await asyncio.wait_for(seen, 10)
            finally:
                writer.close()

    # A thread of its own: its loop is the only one there, whatever an earlier test left running
    # on the main thread.
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, run()).result(30) != 0


async def _hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        message = await receive()
        while message["type"] != "lifespan.shutdown":
            await send({"type": message["type"] + ".complete"})
            message = await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


@pytest.mark.timeout(60)
def test_https_services_allow_only_the_tls_versions_of_ssl_enabled_protocols(tmp_path: Path) -> None:
    """Issue 29, item 7: the HTTPS listeners (admin API, registry, catalog) ignored the key."""
    ca = TestCA(tmp_path / "ca")
    server = ca.issue("localhost", server=True)
    config = Config({"ssl.keystore.location": str(server.combined), "ssl.enabled.protocols": ["TLSv1.3"]})

    def client_context(version: ssl.TLSVersion) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(ca.cert))
        context.check_hostname = False
        context.maximum_version = version
        return context

    async def run() -> tuple[int, str]:
        service = HttpService(
            "probe", _hello, "https://127.0.0.1:0", tls=https_options(config, "https://127.0.0.1:0")
        )
        await service.start()
        try:
            url = f"https://127.0.0.1:{service.port}/"
            async with httpx.AsyncClient(verify=client_context(ssl.TLSVersion.TLSv1_3)) as client:
                ok = (await client.get(url)).status_code
            async with httpx.AsyncClient(verify=client_context(ssl.TLSVersion.TLSv1_2)) as client:
                try:
                    await client.get(url)
                    refused = "served over TLS 1.2"
                except httpx.ConnectError as exc:
                    refused = str(exc)
            return ok, refused
        finally:
            await service.stop()

    with ThreadPoolExecutor(1) as pool:
        ok, refused = pool.submit(asyncio.run, run()).result(30)
    assert ok == 200
    assert "served over TLS 1.2" not in refused
