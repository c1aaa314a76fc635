"""pytest plugin (-p tckauth): the caller's credential on every request the TCK sends.

The TCK has no option for credentials; capgate requires one for every operation but the public
card. With CAPGATE_TCK_TOKEN set, this plugin adds `Authorization: Bearer <token>` to every
httpx.Client and httpx.AsyncClient the TCK creates (JSON-RPC and HTTP+JSON) and the `authorization` metadata to every
call on a gRPC channel it opens, as a client configured with a bearer token would. A header the
TCK sets itself wins, and the 0.3 TCK's checks of unauthenticated requests (sent with the
requests library) stay unauthenticated. It changes nothing else: requests, their order and the
TCK's checks are the TCK's. Unset, it does nothing
(the control run against the reference agent sends no credential).
"""

import os

import grpc
import httpx

_TOKEN = os.environ.get("CAPGATE_TCK_TOKEN", "")


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds the authorization metadata to unary and server-streaming calls."""

    def _with_token(self, details):
        metadata = list(details.metadata or []) + [("authorization", "Bearer " + _TOKEN)]
        return details._replace(metadata=metadata) if hasattr(details, "_replace") else _Details(details, metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_token(details), request)


class _Details(grpc.ClientCallDetails):
    """ClientCallDetails with other metadata (grpc's own class is not a namedtuple)."""

    def __init__(self, details, metadata):
        self.method = details.method
        self.timeout = details.timeout
        self.metadata = metadata
        self.credentials = details.credentials
        self.wait_for_ready = getattr(details, "wait_for_ready", None)
        self.compression = getattr(details, "compression", None)


def pytest_configure(config):
    if not _TOKEN:
        return
    init = httpx.Client.__init__

    def client_init(self, *args, **kwargs):
        headers = dict(kwargs.pop("headers", None) or {})
        headers.setdefault("Authorization", "Bearer " + _TOKEN)
        init(self, *args, headers=headers, **kwargs)

    httpx.Client.__init__ = client_init
    async_init = httpx.AsyncClient.__init__

    def async_client_init(self, *args, **kwargs):
        headers = dict(kwargs.pop("headers", None) or {})
        headers.setdefault("Authorization", "Bearer " + _TOKEN)
        async_init(self, *args, headers=headers, **kwargs)

    httpx.AsyncClient.__init__ = async_client_init
    insecure = grpc.insecure_channel

    def insecure_channel(target, *args, **kwargs):
        return grpc.intercept_channel(insecure(target, *args, **kwargs), _Bearer())

    grpc.insecure_channel = insecure_channel
