/** The Anthropic Messages wire shapes (reference section 1) the translators read and write. */

export interface AnthropicTextBlock {
  type: 'text';
  text: string;
  cache_control?: unknown;
  citations?: unknown;
}
export interface AnthropicImageBlock {
  type: 'image';
  source: { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string };
  cache_control?: unknown;
}
export interface AnthropicDocumentBlock {
  type: 'document';
  source: { type: string; data?: string; media_type?: string; url?: string };
  title?: string;
}
export interface AnthropicToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
  cache_control?: unknown;
}
export interface AnthropicToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content?: string | (AnthropicTextBlock | AnthropicImageBlock | AnthropicDocumentBlock)[];
  is_error?: boolean;
  cache_control?: unknown;
}
export interface AnthropicThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature?: string;
}
export interface AnthropicRedactedThinkingBlock {
  type: 'redacted_thinking';
  data: string;
}

export type AnthropicContentBlock =
  | AnthropicTextBlock
  | AnthropicImageBlock
  | AnthropicDocumentBlock
  | AnthropicToolUseBlock
  | AnthropicToolResultBlock
  | AnthropicThinkingBlock
  | AnthropicRedactedThinkingBlock;

export interface AnthropicMessage {
  /** `system` appears as a trailing message in requests Claude Code sends for models it does not know. */
  role: 'user' | 'assistant' | 'system';
  content: string | AnthropicContentBlock[];
}

export interface AnthropicTool {
  name: string;
  description?: string;
  input_schema?: unknown;
  /** Absent or `custom` for client tools; server tools (web_search_20250305, ...) carry their own type. */
  type?: string;
  cache_control?: unknown;
  defer_loading?: boolean;
}

export type AnthropicToolChoice =
  | { type: 'auto' | 'any' | 'none'; disable_parallel_tool_use?: boolean }
  | { type: 'tool'; name: string; disable_parallel_tool_use?: boolean };

export interface MessagesRequest {
  model: string;
  max_tokens: number;
  messages: AnthropicMessage[];
  system?: string | AnthropicTextBlock[];
  tools?: AnthropicTool[];
  tool_choice?: AnthropicToolChoice;
  stop_sequences?: string[];
  temperature?: number;
  top_p?: number;
  top_k?: number;
  metadata?: { user_id?: string | null };
  stream?: boolean;
  thinking?:
    { type: 'enabled'; budget_tokens?: number } | { type: 'disabled' } | { type: 'adaptive'; display?: string };
  output_config?: { effort?: string; [k: string]: unknown };
  context_management?: unknown;
  [k: string]: unknown;
}

export type AnthropicStopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'pause_turn' | 'refusal';

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  /** cache_creation_input_tokens by TTL. */
  cache_creation?: { ephemeral_5m_input_tokens?: number; ephemeral_1h_input_tokens?: number } | null;
}

export type AnthropicResponseBlock =
  AnthropicTextBlock | AnthropicToolUseBlock | AnthropicThinkingBlock | AnthropicRedactedThinkingBlock;

export interface MessagesResponse {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: AnthropicResponseBlock[];
  stop_reason: AnthropicStopReason | null;
  stop_sequence: string | null;
  usage: AnthropicUsage;
}
