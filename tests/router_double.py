"""A double of Jumpstarter's RouterService (`router_service.go`), from `jumpstarter-protocol`'s
stubs: the relay between a client and the exporter it leased.

Jumpstarter's controller answers a client's Dial with a router endpoint and a token, and
hands the exporter the same pair on its Listen stream; both sides open `Stream` with that
token as their bearer credential, and the router forwards each frame (payload and frame
type) from one to the other. Here the tokens are opaque random strings this double issued
(Jumpstarter's are JWTs signed with its router key, naming the stream as their subject),
and the relay of one stream lives until either side ends it: its peer then sees the end.
"""

from __future__ import annotations

import queue
import secrets
import threading
from collections.abc import Iterator
from typing import Any

import grpc
from jumpstarter_protocol.jumpstarter.v1 import router_pb2, router_pb2_grpc

__all__ = ["RouterDouble"]

_END = object()


class RouterDouble(router_pb2_grpc.RouterServiceServicer):  # type: ignore[misc]
    """Jumpstarter's RouterService: pairs the two streams that present one token."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, str] = {}  # token -> stream name
        # stream name -> (what the side that comes second receives, what the first does)
        self._pending: dict[str, tuple[queue.Queue[Any], queue.Queue[Any]]] = {}
        self.relayed = 0  # frames forwarded, both ways

    def issue(self) -> str:
        """A token for one new stream (what Dial hands both sides)."""
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._streams[token] = secrets.token_hex(16)
        return token

    def _stream_of(self, context: Any) -> str | None:
        metadata = dict(context.invocation_metadata())
        token = str(metadata.get("authorization", "")).removeprefix("Bearer ")
        with self._lock:
            return self._streams.get(token)

    def Stream(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        stream = self._stream_of(context)
        if stream is None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid jwt token")
            return
        with self._lock:
            pair = self._pending.pop(stream, None)
            if pair is None:  # the first side: the second finds the queues
                mine: queue.Queue[Any] = queue.Queue()
                theirs: queue.Queue[Any] = queue.Queue()
                self._pending[stream] = (theirs, mine)
            else:
                mine, theirs = pair
        context.add_callback(lambda: mine.put(_END))  # this call ended: stop answering it
        threading.Thread(target=self._forward, args=(request_iterator, theirs), daemon=True).start()
        while (item := mine.get()) is not _END:
            yield item

    def _forward(self, requests: Iterator[Any], peer: queue.Queue[Any]) -> None:
        try:
            for request in requests:
                peer.put(
                    router_pb2.StreamResponse(
                        payload=request.payload, frame_type=request.frame_type
                    )
                )
                with self._lock:
                    self.relayed += 1
        except Exception:  # the call was cancelled or broke: the relay ends here
            pass
        finally:
            peer.put(_END)
