"""A push gateway on 127.0.0.1 for the tests: it accepts every notification and keeps it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any


class PushGateway:
    """A push gateway on 127.0.0.1 that accepts every notification and keeps it."""

    def __init__(self) -> None:
        self.received: asyncio.Queue[Any] = asyncio.Queue()
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        body = await reader.readexactly(length)
        await self.received.put(json.loads(body))
        answer = b'{"rejected":[]}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(answer)}\r\n\r\n".encode()
            + answer
        )
        await writer.drain()
        writer.close()


@asynccontextmanager
async def running_gateway() -> AsyncIterator[PushGateway]:
    gateway = PushGateway()
    server = await asyncio.start_server(gateway.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    gateway.url = f"http://127.0.0.1:{port}/_matrix/push/v1/notify"
    async with server:
        yield gateway
