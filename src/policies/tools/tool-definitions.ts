import type { ToolInfo } from '../../log/types.js';

/** The tools an agent is given, described the way model APIs (and Inspect logs) describe them. */
export const BASH_TOOL: ToolInfo = {
  name: 'bash',
  description: 'Run a bash command in the sandbox and return its output.',
  parameters: {
    type: 'object',
    properties: { cmd: { type: 'string', description: 'The command to run (up to 1 MiB).' } },
    required: ['cmd'],
    additionalProperties: false,
  },
};

export const TEXT_EDITOR_TOOL: ToolInfo = {
  name: 'text_editor',
  description:
    'View, create and edit files in the sandbox. Commands: view (a file with line numbers, or a directory), ' +
    'create (write file_text to path), str_replace (replace old_str, which must occur exactly once, with new_str), ' +
    'insert (insert new_str after line insert_line), undo_edit (revert the last edit of path).',
  parameters: {
    type: 'object',
    properties: {
      command: { type: 'string', enum: ['view', 'create', 'str_replace', 'insert', 'undo_edit'] },
      path: { type: 'string', description: 'Absolute path of the file or directory.' },
      file_text: { type: 'string', description: 'Contents for create.' },
      old_str: { type: 'string', description: 'Text to replace (str_replace).' },
      new_str: { type: 'string', description: 'Replacement (str_replace) or text to insert (insert).' },
      insert_line: { type: 'integer', description: 'Line after which to insert (0 = top).' },
      view_range: { type: 'array', items: { type: 'integer' }, description: '[start, end] lines to view; end -1 = to the end.' },
    },
    required: ['command', 'path'],
    additionalProperties: false,
  },
};

export const SUBMIT_TOOL: ToolInfo = {
  name: 'submit',
  description: 'Submit your final answer and end the task.',
  parameters: {
    type: 'object',
    properties: { answer: { type: 'string', description: 'The final answer (may be empty).' } },
    required: ['answer'],
    additionalProperties: false,
  },
};

export const AGENT_TOOLS: ToolInfo[] = [BASH_TOOL, TEXT_EDITOR_TOOL, SUBMIT_TOOL];
