import type { ModelOutput } from '../log/types.js';
import { textOf } from '../models/message-text.js';
import type { GenerateRequest } from '../models/types.js';
import type { MonitorModels, MonitorReply, MonitorRequest } from './monitor-types.js';

/** A monitor prompt as one generate request: one user message, no tools. */
export function monitorGenerateRequest(request: MonitorRequest): GenerateRequest {
  return {
    input: [{ role: 'user', content: request.prompt, source: 'input' }],
    tools: [],
    toolChoice: 'none',
    config: request.config,
    ...(request.signal ? { signal: request.signal } : {}),
  };
}

/** The reply's text and usage from one generate call's output. */
export function monitorReply(output: ModelOutput): MonitorReply {
  const message = output.choices[0]?.message;
  return { text: message ? textOf(message.content) : '', cached: false, ...(output.usage ? { usage: output.usage } : {}) };
}

/** Monitor calls straight to the model: no cache, every prompt is a model call. */
export function directMonitorModels(): MonitorModels {
  return {
    async complete(request) {
      const r = await request.model.generate(monitorGenerateRequest(request));
      return monitorReply(r.output);
    },
  };
}
