"""A proxyless gRPC C-core client (Python grpcio) for e2e tests.

Calls canopy.demo.v1.Echo/Who on TARGET (an xds:/// name, resolved through
GRPC_XDS_BOOTSTRAP) every 100 ms for SECONDS, printing one line per call:
"ok" or "err <status code>". Requests and replies are raw bytes: an empty
WhoRequest is zero bytes, and only the call's status matters here.
"""
import sys
import time

import grpc

target, seconds = sys.argv[1], float(sys.argv[2])
channel = grpc.insecure_channel(target)
who = channel.unary_unary("/canopy.demo.v1.Echo/Who")
end = time.time() + seconds
while time.time() < end:
    try:
        who(b"", timeout=1)
        print("ok", flush=True)
    except grpc.RpcError as e:
        print("err", e.code().name, flush=True)
    time.sleep(0.1)
