import { SSE_HEADERS, sseEvent } from '../../sse';
import { USAGE_ID_HEADER } from '../../modelCall';

/**
 * How streamGenerateContent frames its responses: with `?alt=sse`, one `data:` event each (what the SDKs ask for);
 * without it, one JSON array written element by element (`[{...}\n,\r\n{...}]`, as Google's API streams it).
 */
export class GeminiStreamWire {
  private first = true;

  constructor(readonly sse: boolean) {}

  /**
   * The response headers the sink opens with. They carry the usage record's id: a Gemini stream ends without the
   * cost comment other streams carry (the Google GenAI SDK bundled in Gemini CLI fails on any SSE line that is
   * not `data:`), so its cost is looked up by that id (GET /v1/usage).
   */
  headers(usageId: string): Record<string, string> {
    const base: Record<string, string> = this.sse
      ? { ...SSE_HEADERS }
      : { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache' };
    return { ...base, [USAGE_ID_HEADER]: usageId };
  }

  /** One GenerateContentResponse (or an error object) as framed on the wire. */
  item(obj: unknown): string {
    const json = JSON.stringify(obj);
    if (this.sse) return sseEvent(json);
    const prefix = this.first ? '[' : '\n,\r\n';
    this.first = false;
    return prefix + json;
  }

  /** The end of the stream: nothing more for SSE, the closing bracket of the array. */
  end(): string {
    if (this.sse) return '';
    const out = this.first ? '[]' : '\n]';
    this.first = false;
    return out;
  }
}
