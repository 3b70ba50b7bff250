import type { Sample } from '../tasks/types.js';

/** The user message an agent starts from: the environment, then the main task. */
export function taskPrompt(sample: Sample): string {
  const parts = [];
  if (sample.env.description.trim()) parts.push(`# Environment: ${sample.env.id}\n\n${sample.env.description.trim()}`);
  parts.push(`# Task: ${sample.mainTask.name}\n\n${sample.mainTask.description.trim()}`);
  parts.push('Use the tools to work in the environment. When you are done, call submit.');
  return parts.join('\n\n');
}
