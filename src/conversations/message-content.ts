import { InvalidRequest } from '../errors.ts';
import { asList, httpUrl, isPlainObject, text } from './fields.ts';

/** What a message can carry besides its text, and how updates add to it. */

export interface Attachment {
  url: string;
  type?: string;
  name?: string;
  size?: number;
}

/** Stored and answered as `[{"like": ["ana", "bo"]}, {"heart": ["cy"]}]`, in order of first use. */
export type Reactions = Array<Record<string, string[]>>;

// Bounds that keep one message row from growing without end through repeated updates.
export const MAX_ATTACHMENTS = 100;
export const MAX_REACTION_NAMES = 100;
export const MAX_REACTORS = 1000;

const ATTACHMENT_KEYS = new Set(['url', 'type', 'name', 'size']);

/** `attachments` as sent (JSON array or form `attachments[0][url]=…`), validated. */
export function parseAttachments(value: unknown, param = 'attachments'): Attachment[] {
  if (value === undefined || value === null) return [];
  const list = asList(value);
  if (!list) throw new InvalidRequest(`${param} must be an array of attachment objects.`, param);
  if (list.length > MAX_ATTACHMENTS) throw new InvalidRequest(`${param} may hold at most ${MAX_ATTACHMENTS} attachments.`, param);
  return list.map((item, i) => parseAttachment(item, `${param}[${i}]`));
}

function parseAttachment(item: unknown, param: string): Attachment {
  if (!isPlainObject(item)) throw new InvalidRequest(`${param} must be an object with a url.`, param);
  for (const key of Object.keys(item)) {
    if (!ATTACHMENT_KEYS.has(key)) throw new InvalidRequest(`Unknown attachment field ${key}: an attachment has url, type, name and size.`, `${param}.${key}`);
  }
  const out: Attachment = { url: httpUrl(item.url, `${param}.url`, { required: true })! };
  const type = text(item.type, `${param}.type`, { max: 255 });
  if (type !== undefined) out.type = type;
  const name = text(item.name, `${param}.name`, { max: 1024 });
  if (name !== undefined) out.name = name;
  if (item.size !== undefined && item.size !== null && item.size !== '') {
    // Forms carry every value as a string; an integer written in digits means the same there.
    const size = typeof item.size === 'string' && /^\d+$/.test(item.size) ? Number(item.size) : item.size;
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
      throw new InvalidRequest(`${param}.size must be a non-negative integer (bytes).`, `${param}.size`);
    }
    out.size = size;
  }
  return out;
}

/**
 * `reactions` as sent: the form's `reactions[like][]=ana` (an object of name to people), the same
 * object in JSON, or the answer's own shape (an array of such objects). Returns the pairs to add,
 * in the order given.
 */
export function parseReactionAdditions(value: unknown, param = 'reactions'): Array<[string, string[]]> {
  if (value === undefined || value === null) return [];
  const groups = isPlainObject(value) ? [value] : Array.isArray(value) ? value : undefined;
  if (!groups) throw new InvalidRequest(`${param} must map reaction names to who reacted, e.g. reactions[like][]=ana.`, param);
  const pairs: Array<[string, string[]]> = [];
  groups.forEach((group, i) => {
    const at = Array.isArray(value) ? `${param}[${i}]` : param;
    if (!isPlainObject(group)) throw new InvalidRequest(`${at} must be an object mapping a reaction name to who reacted.`, at);
    for (const [name, who] of Object.entries(group)) {
      const p = `${at}[${name}]`;
      if (name === '' || name.length > 100 || name.includes('\u0000')) throw new InvalidRequest('A reaction name must be 1 to 100 characters.', p);
      const list = typeof who === 'string' ? [who] : asList(who);
      if (!list || list.length === 0) throw new InvalidRequest(`${p} must list who reacted, e.g. ${p}[]=ana.`, p);
      pairs.push([name, list.map((w, j) => text(w, `${p}[${j}]`, { required: true, max: 255 })!)]);
    }
  });
  return pairs;
}

/** Adds each person to each reaction once, keeping the order of first use. */
export function addReactions(current: Reactions, additions: Array<[string, string[]]>): { reactions: Reactions; changed: boolean } {
  const byName = new Map<string, string[]>();
  for (const group of current) for (const [name, who] of Object.entries(group)) byName.set(name, [...(byName.get(name) ?? []), ...who]);
  let changed = false;
  for (const [name, who] of additions) {
    let list = byName.get(name);
    if (!list) byName.set(name, (list = []));
    for (const w of who) {
      if (list.includes(w)) continue;
      list.push(w);
      changed = true;
    }
    if (list.length > MAX_REACTORS) throw new InvalidRequest(`A reaction may list at most ${MAX_REACTORS} people.`, `reactions[${name}]`);
  }
  if (byName.size > MAX_REACTION_NAMES) throw new InvalidRequest(`A message may carry at most ${MAX_REACTION_NAMES} reaction names.`, 'reactions');
  return { reactions: [...byName].map(([name, who]) => ({ [name]: who })), changed };
}
