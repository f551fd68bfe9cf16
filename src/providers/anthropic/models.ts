/** Whether an upstream model name is a Claude model (Bedrock ids and inference profiles, Vertex names). */
export function isClaudeModel(upstreamModel: string): boolean {
  return /(^|[.:/])(anthropic\.)?claude-/.test(upstreamModel);
}
