#!/usr/bin/python3
"""A gRPC C-core xDS test peer (Debian python3-grpcio): one process per
bootstrap (GRPC_XDS_BOOTSTRAP is process-wide), calling the demo Echo
service's Who at xds:///NAME. Driven over stdin/stdout, one JSON object per
line: {"tally": N, "deadline_ms": D[, "rps": R]} -> {"by_backend": {...},
"failures": F, "last_error": "..."}; with "rps", the calls are paced at R a
second. No generated stubs: WhoRequest and WhoReply are tiny
and read by hand (WhoReply.backend_id is field 1)."""
import json
import sys
import time

import grpc


def varint(buf, i):
    shift = 0
    n = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7


def backend_id(reply):
    i = 0
    while i < len(reply):
        key, i = varint(reply, i)
        field, wire = key >> 3, key & 7
        if wire == 2:
            length, i = varint(reply, i)
            if field == 1:
                return reply[i : i + length].decode()
            i += length
        elif wire == 0:
            _, i = varint(reply, i)
        else:
            raise ValueError("unexpected wire type %d" % wire)
    return ""


def main():
    target = sys.argv[1]
    channel = grpc.insecure_channel(target)
    who = channel.unary_unary("/canopy.demo.v1.Echo/Who")
    request = b"\x0a\x05ccore"  # WhoRequest{caller: "ccore"}
    print(json.dumps({"ready": True, "grpc": grpc.__version__}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        by_backend = {}
        failures = 0
        last_error = ""
        rps = float(cmd.get("rps", 0))
        start = time.monotonic()
        for n in range(int(cmd["tally"])):
            if rps > 0:
                wait = start + n / rps - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            try:
                reply = who(request, timeout=cmd.get("deadline_ms", 2000) / 1000.0)
                b = backend_id(reply)
                by_backend[b] = by_backend.get(b, 0) + 1
            except grpc.RpcError as e:
                failures += 1
                last_error = "%s: %s" % (e.code().name, e.details())
        print(json.dumps({"by_backend": by_backend, "failures": failures, "last_error": last_error}), flush=True)
    channel.close()


if __name__ == "__main__":
    main()
