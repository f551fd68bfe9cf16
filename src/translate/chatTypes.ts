/**
 * The OpenAI Chat Completions wire shapes the translators read and write (reference section 3). Kept here so the
 * translators stay pure and independent of any provider module; they are plain JSON and structurally compatible
 * with the provider layer's types.
 */

/**
 * cache_control: Anthropic's prompt-cache breakpoint, which chat clients may put on parts for Claude models (as
 * OpenRouter takes it).
 */
export interface ChatTextPart {
  type: 'text';
  text: string;
  cache_control?: unknown;
}
export interface ChatImagePart {
  type: 'image_url';
  image_url: { url: string; detail?: string };
  cache_control?: unknown;
}
export type ChatContentPart = ChatTextPart | ChatImagePart;

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export type ChatMessage =
  | { role: 'system'; content: string | ChatTextPart[] }
  | { role: 'user'; content: string | ChatContentPart[] }
  | { role: 'assistant'; content: string | null; tool_calls?: ChatToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string | ChatContentPart[] };

export interface ChatFunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: unknown; strict?: boolean };
}

export type ChatToolChoice = 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ChatFunctionTool[];
  tool_choice?: ChatToolChoice;
  parallel_tool_calls?: boolean;
  max_tokens?: number;
  /** Reasoning models take this instead of max_tokens. */
  max_completion_tokens?: number;
  stop?: string[];
  temperature?: number;
  top_p?: number;
  top_k?: number;
  user?: string;
  reasoning_effort?: 'minimal' | 'low' | 'medium' | 'high';
  response_format?: unknown;
  stream?: boolean;
  stream_options?: { include_usage: boolean };
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
  /**
   * cached_tokens: prompt-cache reads. cache_write_tokens (as OpenRouter reports them) and cache_write_1h_tokens (the
   * part of them written for 1 hour): set by the Messages bridge when an Anthropic upstream wrote to its cache.
   */
  prompt_tokens_details?: {
    cached_tokens?: number;
    cache_write_tokens?: number;
    cache_write_1h_tokens?: number;
    audio_tokens?: number;
  } | null;
  completion_tokens_details?: { reasoning_tokens?: number; audio_tokens?: number } | null;
}

export type ChatFinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call' | null;

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: number;
    message: {
      role: 'assistant';
      content: string | null;
      tool_calls?: ChatToolCall[];
      reasoning_content?: string | null;
      reasoning?: string | null;
      refusal?: string | null;
    };
    finish_reason: ChatFinishReason;
    logprobs?: unknown;
  }[];
  usage?: ChatUsage | null;
}

export interface ChatToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices:
    | {
        index: number;
        delta: {
          role?: 'assistant';
          content?: string | null;
          reasoning_content?: string | null;
          reasoning?: string | null;
          tool_calls?: ChatToolCallDelta[];
          refusal?: string | null;
        };
        finish_reason: ChatFinishReason;
      }[]
    | null;
  usage?: ChatUsage | null;
}
