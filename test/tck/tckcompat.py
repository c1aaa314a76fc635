"""pytest plugin (-p tckcompat): the 1.0 TCK's generated modules as protobuf >= 4 loads them.

The TCK imports its messages as specification.generated.a2a_pb2, and its gRPC stubs import the
same file as the top-level module a2a_pb2 (specification/generated/__init__.py puts that folder on
sys.path). protobuf >= 4 builds one class per message descriptor, so both names give the same
classes; Debian's protobuf 3.21 builds a class per import, and the TCK's type checks then fail
("expected lf.a2a.v1.StreamResponse, got lf.a2a.v1.StreamResponse"). This plugin makes the two
names one module, as with the TCK's own dependencies. It runs at import, before the TCK's
conftest imports its gRPC client. The 0.3 TCK imports its stubs under one name and needs nothing.
"""

import importlib
import sys

try:
    _pb2 = importlib.import_module("specification.generated.a2a_pb2")
except ImportError:
    _pb2 = None
if _pb2 is not None:
    sys.modules.setdefault("a2a_pb2", _pb2)
