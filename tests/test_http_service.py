"""The HTTP listener shared by the admin API, the schema registry and the REST catalog."""

from __future__ import annotations

import asyncio
import socket
from concurrent.futures import ThreadPoolExecutor

from tabletopic.http_service import bind_socket


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
