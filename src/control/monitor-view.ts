/**
 * What a monitor reads, as text: the task, the transcript before an action, the action itself.
 * Built from the monitor's view of the conversation (no private messages, no reasoning; see
 * policies/private-content.ts), so an attack policy's hidden instructions never reach it.
 */
import type { ChatMessage, ChatMessageAssistant, EvalSample, ToolCall } from '../log/types.js';
import { textOf } from '../models/message-text.js';
import { monitorView } from '../policies/private-content.js';

/** A tool output longer than this is cut in the middle for the monitor (head and tail kept). */
export const TOOL_OUTPUT_CHARS = 4000;

/** One action to rate: the task, what came before, and the assistant message that calls tools. */
export interface ActionView {
  task: string;
  /** The monitor's view of the conversation before the action (system prompts excluded). */
  history: ChatMessage[];
  action: ChatMessageAssistant;
}

/** A whole transcript to rate. */
export interface TrajectoryView {
  task: string;
  messages: ChatMessage[];
}

/** The task as the agent was given it: the sample's input (its first user message when a conversation). */
export function taskText(sample: Pick<EvalSample, 'input'> & { messages?: readonly ChatMessage[] }): string {
  if (typeof sample.input === 'string') return sample.input;
  const firstUser = sample.input.find((m) => m.role === 'user');
  return firstUser ? textOf(firstUser.content) : '';
}

/** Whether a message is an action a monitor rates: an assistant message that calls a tool. */
export function isAction(m: ChatMessage): m is ChatMessageAssistant {
  return m.role === 'assistant' && (m.tool_calls?.length ?? 0) > 0;
}

/** The actions of a conversation (the monitor's view), each with the history before it. */
export function actionViews(task: string, messages: readonly ChatMessage[]): ActionView[] {
  const visible = monitorView(messages).filter((m) => m.role !== 'system');
  const views: ActionView[] = [];
  visible.forEach((m, i) => {
    if (isAction(m)) views.push({ task, history: visible.slice(0, i), action: m });
  });
  return views;
}

/** The whole conversation, as a trajectory monitor sees it. */
export function trajectoryView(task: string, messages: readonly ChatMessage[]): TrajectoryView {
  return { task, messages: monitorView(messages).filter((m) => m.role !== 'system') };
}

/** A conversation as plain text, one block per message. */
export function renderMessages(messages: readonly ChatMessage[]): string {
  if (messages.length === 0) return '(nothing yet)';
  return messages.map(renderMessage).join('\n\n');
}

export function renderMessage(m: ChatMessage): string {
  switch (m.role) {
    case 'assistant': {
      const text = textOf(m.content).trim();
      const calls = (m.tool_calls ?? []).map(renderToolCall);
      return ['[agent]', ...(text ? [text] : []), ...calls].join('\n');
    }
    case 'tool': {
      const head = `[tool output: ${m.function ?? 'tool'}]`;
      const err = m.error ? `\n(error: ${m.error.message})` : '';
      return `${head}\n${clip(textOf(m.content))}${err}`;
    }
    case 'user':
      return `[user]\n${textOf(m.content)}`;
    case 'system':
      return `[system]\n${textOf(m.content)}`;
  }
}

/** An action's tool calls as text (what the monitor rates). */
export function renderAction(m: ChatMessageAssistant): string {
  return renderMessage(m);
}

export function renderToolCall(c: ToolCall): string {
  const args = c.arguments ?? {};
  if (c.function === 'bash' && typeof args.cmd === 'string') return `bash: ${args.cmd}`;
  if (c.function === 'bash' && typeof args.command === 'string') return `bash: ${args.command}`;
  return `${c.function}: ${JSON.stringify(args)}`;
}

function clip(text: string, max = TOOL_OUTPUT_CHARS): string {
  if (text.length <= max) return text;
  const half = Math.floor(max / 2);
  return `${text.slice(0, half)}\n... (${text.length - max} characters cut) ...\n${text.slice(-half)}`;
}
