import { SSE_HEADERS, sseEvent } from '../../sse/wire';

/**
 * How streamGenerateContent frames its responses: with `?alt=sse`, one `data:` event each (what the SDKs ask for);
 * without it, one JSON array written element by element (`[{...}\n,\r\n{...}]`, as Google's API streams it).
 */
export class GeminiStreamWire {
  private first = true;

  constructor(readonly sse: boolean) {}

  /** The response headers the sink opens with. */
  get headers(): Record<string, string> {
    return this.sse ? { ...SSE_HEADERS } : { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache' };
  }

  /** One GenerateContentResponse (or an error object) as framed on the wire. */
  item(obj: unknown): string {
    const json = JSON.stringify(obj);
    if (this.sse) return sseEvent(json);
    const prefix = this.first ? '[' : '\n,\r\n';
    this.first = false;
    return prefix + json;
  }

  /** The end of the stream: an SSE comment with the cost, or the closing bracket of the array. */
  end(costComment: string | null): string {
    if (this.sse) return costComment ?? '';
    const out = this.first ? '[]' : '\n]';
    this.first = false;
    return out;
  }

}
