#!/usr/bin/env python3
"""Measures how long `policyc lsp` takes to publish diagnostics after a
one-character edit.

Starts the server, opens FILE (didOpen), then sends EDITS didChange
notifications one at a time, each inserting or removing one character in
the middle of the file (alternately in a string literal and in a comment),
and times each from writing the notification to reading the
publishDiagnostics of that version. Full-document sync, as the server
announces: every change carries the whole text, as an editor would send it.

Usage: python3 bench/lsp_latency.py POLICYC FILE [--edits N]
Prints the first analysis time, then min / median / p90 / max of the edits.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time


def send(proc, message):
    body = json.dumps(message).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def receive(proc):
    length = None
    while True:
        line = proc.stdout.readline()
        if not line:
            sys.exit("lsp_latency.py: the server closed its output")
        line = line.strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(proc.stdout.read(length))


def wait_diagnostics(proc, uri, version):
    while True:
        msg = receive(proc)
        if msg.get("method") == "textDocument/publishDiagnostics":
            params = msg["params"]
            if params["uri"] == uri and params.get("version") == version:
                return params["diagnostics"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("policyc")
    parser.add_argument("file")
    parser.add_argument("--edits", type=int, default=60)
    args = parser.parse_args()

    with open(args.file, encoding="utf-8") as f:
        text = f.read()
    uri = "file://" + args.file
    # Edit sites: a string literal and a comment near the middle.
    middle = len(text) // 2
    string_site = text.index('"/etc/', middle) + 2
    comment_site = text.index("// ", 0) + 3

    proc = subprocess.Popen(
        [args.policyc, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    while receive(proc).get("id") != 1:
        pass
    send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})

    start = time.perf_counter()
    send(proc, {"jsonrpc": "2.0", "method": "textDocument/didOpen",
                "params": {"textDocument": {"uri": uri, "languageId": "policy",
                                            "version": 1, "text": text}}})
    first = wait_diagnostics(proc, uri, 1)
    open_ms = (time.perf_counter() - start) * 1000

    times = []
    current = text
    for i in range(args.edits):
        version = i + 2
        site = string_site if (i // 2) % 2 == 0 else comment_site
        if i % 2 == 0:
            current = current[:site] + "x" + current[site:]
        else:
            current = current[:site] + current[site + 1:]
        start = time.perf_counter()
        send(proc, {"jsonrpc": "2.0", "method": "textDocument/didChange",
                    "params": {"textDocument": {"uri": uri, "version": version},
                               "contentChanges": [{"text": current}]}})
        diagnostics = wait_diagnostics(proc, uri, version)
        times.append((time.perf_counter() - start) * 1000)
        if len(diagnostics) != len(first):
            sys.exit(f"lsp_latency.py: edit {i} changed the diagnostics: {diagnostics[:3]}")

    send(proc, {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None})
    while receive(proc).get("id") != 2:
        pass
    send(proc, {"jsonrpc": "2.0", "method": "exit", "params": None})
    status = proc.wait(timeout=30)

    times.sort()
    p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
    print(f"diagnostics on open: {open_ms:.1f} ms ({len(first)} diagnostics)")
    print(f"after a one-character edit ({len(times)} edits): "
          f"min {times[0]:.1f} ms, median {statistics.median(times):.1f} ms, "
          f"p90 {p90:.1f} ms, max {times[-1]:.1f} ms")
    print(f"server exit status: {status}")
    return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
