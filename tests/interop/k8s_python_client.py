#!/usr/bin/python3
"""Drives swapcri's streaming server with the WebSocket code of the Kubernetes Python client
(Debian's python3-kubernetes): exec with an exit code, exec reading stdin, attach to live
output, port-forward. Reads the URLs as JSON on stdin, prints what it saw as JSON."""

import json
import sys
import time

from kubernetes.client import Configuration
from kubernetes.stream.ws_client import PortForward, WSClient, create_websocket, get_websocket_url


def stage(name):
    print("stage: " + name, file=sys.stderr, flush=True)


def ws(url):
    return get_websocket_url(url)


def main():
    urls = json.load(sys.stdin)
    config = Configuration()
    seen = {}

    stage("exec")
    client = WSClient(config, ws(urls["exec"]), None, True)
    client.run_forever(timeout=30)
    seen["exec"] = {
        "stdout": client.read_stdout(),
        "stderr": client.read_stderr(),
        "returncode": client.returncode,
    }

    stage("stdin")
    client = WSClient(config, ws(urls["stdin"]), None, True)
    client.write_stdin("hello\n")
    client.run_forever(timeout=30)
    seen["stdin"] = {"stdout": client.read_stdout(), "returncode": client.returncode}

    stage("attach")
    client = WSClient(config, ws(urls["attach"]), None, True)
    output = ""
    deadline = time.time() + 30
    while output.count("tick-") < 3 and client.is_open() and time.time() < deadline:
        client.update(timeout=1)
        output += client.read_stdout(timeout=0) or ""
    client.close()
    seen["attach"] = output

    stage("port-forward")
    forward = PortForward(create_websocket(config, ws(urls["portforward"]) + "?ports=8080"), [8080])
    sock = forward.socket(8080)
    sock.setblocking(True)
    sock.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
    body = b""
    sock.settimeout(30)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    forward.close()
    seen["portforward"] = {"body": body.decode("utf-8", "replace"), "error": forward.error(8080)}

    json.dump(seen, sys.stdout)


if __name__ == "__main__":
    main()
