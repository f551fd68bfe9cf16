/** The OpenAI Responses wire shapes (reference section 2) the translators read and write. */

export interface ResponsesContentPart {
  type: string; // input_text | output_text | text | input_image | input_file | refusal | summary_text | reasoning_text
  text?: string;
  image_url?: string | { url: string } | null;
  detail?: string;
  refusal?: string;
  filename?: string;
  file_data?: string;
  annotations?: unknown[];
  logprobs?: unknown[];
}

/** An input or output item. Unknown item kinds are accepted and skipped when translating. */
export interface ResponsesItem {
  type?: string;
  id?: string;
  role?: string;
  content?: string | ResponsesContentPart[];
  status?: string;
  call_id?: string;
  name?: string;
  namespace?: string;
  arguments?: string;
  input?: string;
  output?: string | ResponsesContentPart[];
  summary?: ResponsesContentPart[];
  encrypted_content?: string | null;
  tools?: ResponsesTool[];
  [k: string]: unknown;
}

export interface ResponsesTool {
  type: string; // function | custom | namespace | web_search | local_shell | file_search | mcp | ...
  name?: string;
  description?: string | null;
  parameters?: unknown;
  strict?: boolean | null;
  format?: { type?: string; syntax?: string; definition?: string };
  tools?: ResponsesTool[];
  defer_loading?: boolean;
  [k: string]: unknown;
}

export interface ResponsesRequest {
  model: string;
  input?: string | ResponsesItem[];
  instructions?: string | null;
  tools?: ResponsesTool[];
  tool_choice?: string | { type: string; name?: string; namespace?: string; [k: string]: unknown };
  parallel_tool_calls?: boolean;
  max_output_tokens?: number;
  temperature?: number;
  top_p?: number;
  reasoning?: { effort?: string | null; summary?: string | null; [k: string]: unknown } | null;
  text?: {
    format?: { type: string; name?: string; schema?: unknown; strict?: boolean; description?: string };
    verbosity?: string;
    [k: string]: unknown;
  };
  store?: boolean;
  stream?: boolean;
  previous_response_id?: string | null;
  include?: string[];
  metadata?: Record<string, string> | null;
  user?: string;
  safety_identifier?: string;
  [k: string]: unknown;
}

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: 'completed' | 'incomplete' | 'in_progress' | 'failed';
  model: string;
  output: ResponsesItem[];
  usage: ResponsesUsage | null;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: string } | null;
  [k: string]: unknown;
}
