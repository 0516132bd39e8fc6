#!/usr/bin/env python3
"""A TLS client that says how the server ended the connection (test/integration/tls-handle.test.ts).

usage: tls-end-client.py PORT CAFILE SERVERNAME SOURCE MODE < request
  MODE plain:   send the request, read until the server ends the connection.
  MODE garbage: send the request, read one response (Content-Length), then send an application
                data record that cannot decrypt, and read until the connection ends.
Prints one JSON line: {"end": how it ended, "response": what was read (latin1)}.
`end` is "close_notify" (the server's TLS close alert), "eof" (TCP FIN without it), "reset",
"ssl_error:REASON" (an alert or a record error), or "timeout".

OpenSSL through Python's memory BIOs, so that a close_notify and a bare FIN are told apart.
"""
import json
import os
import re
import socket
import ssl
import sys

port, cafile, name, source, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=cafile)
ctx.set_alpn_protocols(["http/1.1"])
sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ctx.wrap_bio(incoming, outgoing, server_hostname=name)


def flush():
    data = outgoing.read()
    if data:
        sock.sendall(data)


eof_seen = False


def pump():
    global eof_seen
    data = sock.recv(65536)
    if data:
        incoming.write(data)
    else:
        eof_seen = True
        incoming.write_eof()


def finish(end, data):
    print(json.dumps({"end": end, "response": data.decode("latin1")}))
    sys.exit(0)


while True:
    try:
        tls.do_handshake()
        break
    except ssl.SSLWantReadError:
        flush()
        pump()
flush()
tls.write(sys.stdin.buffer.read())
flush()

data = b""
garbage_sent = False
while True:
    if mode == "garbage" and not garbage_sent:
        m = re.search(rb"\r\ncontent-length: *(\d+)\r\n", data, re.I)
        head_end = data.find(b"\r\n\r\n")
        if m is not None and head_end >= 0 and len(data) >= head_end + 4 + int(m.group(1)):
            sock.sendall(b"\x17\x03\x03\x00\x40" + os.urandom(64))
            garbage_sent = True
    try:
        chunk = tls.read(65536)
        if not chunk:
            # SSLObject.read gives b"" for a close_notify (and, suppressing ragged EOFs, after a
            # FIN without one): which it was is whether the FIN had been read yet.
            finish("eof" if eof_seen else "close_notify", data)
        data += chunk
    except ssl.SSLWantReadError:
        try:
            pump()
        except ConnectionResetError:
            finish("reset", data)
        except socket.timeout:
            finish("timeout", data)
    except ssl.SSLZeroReturnError:
        finish("close_notify", data)
    except ssl.SSLEOFError:
        finish("eof", data)
    except ssl.SSLError as e:
        finish("ssl_error:" + str(e.reason), data)
