"""pytest plugin (-p tckwebhook): the 1.0 TCK's webhook receiver on a port the harness holds.

The TCK's push delivery tests (PUSH-DELIVER-*) start a webhook receiver on a port the kernel
picks and ask the agent to call it. capgate admits a push config only for a URL under
push.allowed_urls, whose entries name a whole origin, port included (docs/security.md), so no
config written beforehand could admit that URL, and the TCK skips the tests when the send is
refused. With CAPGATE_TCK_WEBHOOK_FD set, the receiver's HTTP server takes the listening socket
the harness passed as that file descriptor (127.0.0.1, a port it holds and lists in
push.allowed_urls) instead of binding one. The receiver, its handler and every check are the
TCK's.
"""

import os
import socket

_FD = os.environ.get("CAPGATE_TCK_WEBHOOK_FD", "")

if _FD:
    try:
        from tck.webhook import server as _server
    except ImportError:  # the 0.3 TCK has no webhook receiver
        _server = None
    if _server is not None:

        class _HeldHTTPServer(_server.HTTPServer):
            """An HTTPServer on the harness's listening socket (a duplicate of it)."""

            def __init__(self, _address, handler):
                super().__init__(("127.0.0.1", 0), handler, bind_and_activate=False)
                self.socket.close()
                self.socket = socket.socket(fileno=os.dup(int(_FD)))
                self.server_address = self.socket.getsockname()
                self.server_name, self.server_port = self.server_address[:2]

        _server.HTTPServer = _HeldHTTPServer
