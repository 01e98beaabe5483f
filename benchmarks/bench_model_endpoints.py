"""Embedding a corpus through an endpoint: batches in flight at once against the ideal.

A local server on 127.0.0.1 speaks ``POST /v1/embeddings`` and answers every batch after
a fixed latency (50 ms by default), with 384-dimensional vectors (its replies are encoded
once per batch size, so the server itself costs next to nothing). The corpus of
``--passages`` synthetic passages (100,000 by default) is embedded in batches of 64
through ``[pipeline.embedding]``'s client, once per concurrency and ``encoding_format``
(``base64``, the default, and ``float``: JSON numbers); the ideal is
``batches x latency / concurrency``, and the issue's target is at most 1.2 times it.
Each setting is timed ``--repeats`` times, the settings interleaved; medians are quoted
with the CPU seconds of this process. Run on demand::

    .venv/bin/python benchmarks/bench_model_endpoints.py [--passages 100000] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import statistics
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pytest_ragev.clients import EmbeddingClient, EmbeddingConfig

DIMENSIONS = 384


def serve(latency: float) -> tuple[ThreadingHTTPServer, str]:
    replies: dict[tuple[int, str], bytes] = {}
    lock = threading.Lock()

    def reply_for(count: int, encoding: str) -> bytes:
        with lock:
            if (count, encoding) not in replies:
                vectors = [[round(((i * 31 + d * 17) % 97) / 97 - 0.5, 4)
                            for d in range(DIMENSIONS)] for i in range(count)]
                data = [{"object": "embedding", "index": i,
                         "embedding": vector if encoding == "float" else
                         base64.b64encode(struct.pack(f"<{DIMENSIONS}f", *vector)).decode()}
                        for i, vector in enumerate(vectors)]
                replies[count, encoding] = json.dumps({"object": "list", "data": data}).encode()
            return replies[count, encoding]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency)
            payload = reply_for(len(body["input"]), body.get("encoding_format", "float"))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 256
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", default="4,8,16",
                        type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--encodings", default="base64,float", type=lambda s: s.split(","),
                        help="encoding_format values to time (base64 is the default)")
    args = parser.parse_args()
    httpd, url = serve(args.latency)
    texts = [f"passage {i}: the tower number {i % 997} stands in town {i % 89}."
             for i in range(args.passages)]
    batches = math.ceil(args.passages / args.batch_size)
    settings = [(e, c) for e in args.encodings for c in args.concurrency]
    times: dict[tuple[str, int], list[tuple[float, float]]] = {s: [] for s in settings}
    try:
        for _ in range(args.repeats):
            for encoding, concurrency in settings:
                client = EmbeddingClient(EmbeddingConfig.from_table(
                    {"base_url": url, "model": "bench", "batch_size": args.batch_size,
                     "concurrency": concurrency, "encoding_format": encoding}, source="bench"))
                wall, cpu = time.perf_counter(), time.process_time()
                vectors = client.embed_many(texts)
                times[encoding, concurrency].append((time.perf_counter() - wall,
                                                     time.process_time() - cpu))
                assert len(vectors) == args.passages and len(vectors[0]) == DIMENSIONS
    finally:
        httpd.shutdown()
    print(f"## {args.passages} passages, batches of {args.batch_size} ({batches} requests), "
          f"{args.latency * 1000:.0f} ms per batch, {DIMENSIONS} dimensions, median of "
          f"{args.repeats} interleaved runs\n")
    print("| encoding_format | concurrency | ideal (batches x latency / concurrency) "
          "| measured wall | ratio | CPU s | target <= 1.2 |")
    print("|---|---|---|---|---|---|---|")
    for (encoding, concurrency), runs in times.items():
        ideal = batches * args.latency / concurrency
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        ratio = wall / ideal
        print(f"| {encoding} | {concurrency} | {ideal:.2f} s | {wall:.2f} s | {ratio:.2f} "
              f"| {cpu:.1f} | {'met' if ratio <= 1.2 else 'MISSED'} |")


if __name__ == "__main__":
    main()
