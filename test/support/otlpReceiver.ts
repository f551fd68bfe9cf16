import http from 'node:http';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
// The OTLP protobuf definitions, as compiled by the OpenTelemetry exporters themselves (protobufjs static code).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { opentelemetry: proto } = require('@opentelemetry/otlp-transformer/build/src/generated/root');

/**
 * An OTLP/HTTP trace receiver for tests: accepts POST /v1/traces in http/protobuf and http/json, decodes every
 * span into a plain record (ids as hex, attributes as values), and keeps them with the encoding they came in.
 */

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> }[];
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: number;
  resource: Record<string, unknown>;
  encoding: 'protobuf' | 'json';
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Export requests received, by encoding. */
  requests: { protobuf: number; json: number };
  /** Spans of one trace. */
  trace(traceId: string): ReceivedSpan[];
  close(): Promise<void>;
}

const hex = (v: unknown): string => {
  if (v === undefined || v === null || v === '') return '';
  if (typeof v === 'string') return v.toLowerCase(); // http/json carries ids as hex strings
  return Buffer.from(v as Uint8Array).toString('hex');
};

/** A protobuf int64 (a Long, a number) or a JSON one (a string) as a bigint. */
const big = (v: unknown): bigint => (v === undefined || v === null ? 0n : BigInt(String(v)));

function value(v: any): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined && v.stringValue !== null) return v.stringValue;
  if (v.boolValue !== undefined && v.boolValue !== null) return v.boolValue;
  if (v.intValue !== undefined && v.intValue !== null) return Number(String(v.intValue));
  if (v.doubleValue !== undefined && v.doubleValue !== null) return Number(v.doubleValue);
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(value);
  return undefined;
}

function attrs(list: any[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list ?? []) out[kv.key] = value(kv.value);
  return out;
}

function spansOf(req: any, encoding: 'protobuf' | 'json'): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          name: s.name,
          kind: Number(s.kind ?? 0),
          startNs: big(s.startTimeUnixNano),
          endNs: big(s.endTimeUnixNano),
          attributes: attrs(s.attributes),
          events: (s.events ?? []).map((e: any) => ({ name: e.name, attributes: attrs(e.attributes) })),
          status: Number(s.status?.code ?? 0),
          resource,
          encoding,
        });
      }
    }
  }
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests = { protobuf: 0, json: 0 };
  const ExportRequest = proto.proto.collector.trace.v1.ExportTraceServiceRequest;
  const ExportResponse = proto.proto.collector.trace.v1.ExportTraceServiceResponse;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
      const type = String(req.headers['content-type'] ?? '');
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      try {
        if (type.startsWith('application/x-protobuf')) {
          requests.protobuf++;
          spans.push(...spansOf(ExportRequest.decode(body), 'protobuf'));
          res
            .writeHead(200, { 'content-type': 'application/x-protobuf' })
            .end(Buffer.from(ExportResponse.encode({}).finish()));
        } else if (type.startsWith('application/json')) {
          requests.json++;
          spans.push(...spansOf(JSON.parse(body.toString('utf8')), 'json'));
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } else {
          res.writeHead(415).end();
        }
      } catch (e) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(String(e));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    spans,
    requests,
    trace: (traceId) => spans.filter((s) => s.traceId === traceId),
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
