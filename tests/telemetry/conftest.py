"""An in-process OTLP/HTTP receiver, and a clean OTEL_* environment for every telemetry test.

The receiver is what a collector (Jaeger, Phoenix, Langfuse) does on ``POST /v1/traces``: decode
an ``ExportTraceServiceRequest`` (gzip-compressed or not) and keep its spans, so tests assert on
what actually went over the wire rather than on SDK internals. On ``POST /v1/metrics`` it decodes an
``ExportMetricsServiceRequest`` and keeps every data point.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def clean_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_* setting of the developer's shell leaks into a test."""
    import os

    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: int
    status_message: str
    resource: dict[str, Any]
    scope: str
    start: int = 0
    """Start, in nanoseconds since the epoch."""
    end: int = 0
    links: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """(trace id, span id, attributes) of each span this one links to."""


@dataclass
class ReceivedPoint:
    """One data point of an exported metric."""

    name: str
    unit: str
    kind: str
    """``sum``, ``gauge`` or ``histogram``."""
    monotonic: bool
    temporality: int
    """1 delta, 2 cumulative (0 for a gauge)."""
    attributes: dict[str, Any]
    value: float
    """A number point's value; a histogram's count."""
    time: int
    resource: dict[str, Any]
    scope: str
    histogram_sum: float = 0.0
    bounds: tuple[float, ...] = ()
    bucket_counts: tuple[int, ...] = ()


@dataclass
class Receiver:
    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    encodings: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    points: list[ReceivedPoint] = field(default_factory=list)

    def latest(self, name: str) -> dict[frozenset[tuple[str, Any]], ReceivedPoint]:
        """The last point received of metric ``name`` for each set of attributes."""
        found: dict[frozenset[tuple[str, Any]], ReceivedPoint] = {}
        for point in sorted((p for p in self.points if p.name == name), key=lambda p: p.time):
            found[frozenset(point.attributes.items())] = point
        return found

    def value(self, name: str, **attributes: Any) -> float:
        """The last value of metric ``name`` with exactly these attributes."""
        latest = self.latest(name)
        key = frozenset(attributes.items())
        assert key in latest, f"no {name} point with {attributes}; have {[dict(k) for k in latest]}"
        return latest[key].value

    def named(self, name: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReceivedSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}; have {[s.name for s in self.spans]}"
        return found[0]


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def key_values(kvs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as rec:
        yield rec


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP trace and metrics receiver on 127.0.0.1 (the ``receiver`` fixture; other test folders use it
    too)."""
    trace_service_pb2 = pytest.importorskip(
        "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
        reason="the 'otel' extra (opentelemetry-proto) is not installed")
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            encoding = self.headers.get("Content-Encoding", "")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            if self.path == "/v1/metrics":
                points = metric_points(body)
                with lock:
                    rec.points.extend(points)
                    rec.encodings.append(encoding)
                    rec.paths.append(self.path)
                self.answer(metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString())
                return
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            spans = []
            for rs in request.resource_spans:
                resource = key_values(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        spans.append(ReceivedSpan(
                            name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(), kind=s.kind,
                            attributes=key_values(s.attributes),
                            events=[(e.name, key_values(e.attributes)) for e in s.events],
                            status_code=s.status.code, status_message=s.status.message, resource=resource,
                            scope=ss.scope.name, start=s.start_time_unix_nano, end=s.end_time_unix_nano,
                            links=[(link.trace_id.hex(), link.span_id.hex(), key_values(link.attributes))
                                   for link in s.links]))
            with lock:
                rec.spans.extend(spans)
                rec.encodings.append(encoding)
                rec.paths.append(self.path)
            self.answer(trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

        def answer(self, payload: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

    def metric_points(body: bytes) -> list[ReceivedPoint]:
        request = metrics_service_pb2.ExportMetricsServiceRequest()
        request.ParseFromString(body)
        points = []
        for rm in request.resource_metrics:
            resource = key_values(rm.resource.attributes)
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    kind = metric.WhichOneof("data")
                    data = getattr(metric, kind)
                    monotonic = bool(getattr(data, "is_monotonic", False))
                    temporality = int(getattr(data, "aggregation_temporality", 0))
                    for dp in data.data_points:
                        common = dict(name=metric.name, unit=metric.unit, kind=kind, monotonic=monotonic,
                                      temporality=temporality, attributes=key_values(dp.attributes),
                                      time=dp.time_unix_nano, resource=resource, scope=sm.scope.name)
                        if kind == "histogram":
                            points.append(ReceivedPoint(**common, value=dp.count, histogram_sum=dp.sum,
                                                        bounds=tuple(dp.explicit_bounds),
                                                        bucket_counts=tuple(dp.bucket_counts)))
                        else:
                            number = dp.as_double if dp.WhichOneof("value") == "as_double" else dp.as_int
                            points.append(ReceivedPoint(**common, value=number))
        return points

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
