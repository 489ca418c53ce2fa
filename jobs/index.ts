import type { TaskList } from 'graphile-worker';
import type { Runtime } from '../src/runtime.ts';

/**
 * Every graphile-worker task, by name (`domain__action`). Task files are thin: they
 * parse the payload and call a domain service.
 */
export function createTaskList(_rt: Runtime): TaskList {
  return {};
}
