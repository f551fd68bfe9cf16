import { createHash } from 'node:crypto';

/**
 * Chat Completions function names must match ^[a-zA-Z0-9_-]{1,64}$. Client tools can have longer names (MCP tools),
 * other characters, a namespace (Responses `namespace` tools) or be free-form `custom` tools. ToolNameMap gives
 * each client tool a valid chat name and maps the model's calls back to the client's tool.
 */

export interface ToolOrigin {
  name: string;
  /** `custom`: a free-form tool wrapped as a one-string-argument function (its calls unwrap to custom_tool_call). */
  kind: 'function' | 'custom';
  namespace?: string;
}

const MAX = 64;
const VALID = /^[a-zA-Z0-9_-]{1,64}$/;

/** Names over 64 characters: the first 55, `_`, and 8 hex chars of the SHA-256 of the full name. */
export function shortenToolName(name: string): string {
  if (name.length <= MAX) return name;
  return `${name.slice(0, 55)}_${createHash('sha256').update(name).digest('hex').slice(0, 8)}`;
}

function chatNameOf(name: string, namespace?: string): string {
  const full = namespace ? `${namespace}__${name}` : name;
  if (VALID.test(full)) return full;
  const cleaned = full.replace(/[^a-zA-Z0-9_-]/g, '_') || 'tool';
  if (cleaned === full) return shortenToolName(full);
  // Characters were replaced: add a hash of the original so distinct names stay distinct.
  const hash = createHash('sha256').update(full).digest('hex').slice(0, 8);
  return `${cleaned.slice(0, 55)}_${hash}`;
}

export class ToolNameMap {
  private byChat = new Map<string, ToolOrigin>();

  /** Registers a client tool (or a tool named in the history) and returns its chat-side name. */
  add(origin: ToolOrigin): string {
    const chat = chatNameOf(origin.name, origin.namespace);
    const prev = this.byChat.get(chat);
    // A tool declared as custom stays custom when the history names it again.
    if (!prev || (prev.kind === 'function' && origin.kind === 'custom')) this.byChat.set(chat, { ...origin });
    return chat;
  }

  /** The client tool behind a chat name; unknown names are returned as plain function names. */
  resolve(chatName: string): ToolOrigin {
    return this.byChat.get(chatName) ?? { name: chatName, kind: 'function' };
  }

  get size(): number {
    return this.byChat.size;
  }
}
