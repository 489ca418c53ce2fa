import { Prisma } from '../generated/prisma/client.ts';
import { NotFound } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Runtime } from '../runtime.ts';
import { contactExists, readContactPage } from './contact-reads.ts';
import { httpUrl, text } from './fields.ts';
import { idPage, type IdPage, type IdPageRequest } from './id-page.ts';
import { CONTACT_INCLUDE, type ContactQuery, type ContactRow } from './rows.ts';

type Rt = Pick<Runtime, 'db'>;

function includeWith(query?: ContactQuery) {
  return { ...CONTACT_INCLUDE, ...query?.include };
}

export interface CreateContactInput {
  username?: unknown;
  phone_number?: unknown;
  avatar_url?: unknown;
  display_name?: unknown;
}

/** Creates the contact and its one conversation in the same transaction (one nested write). */
export async function createContact(rt: Rt, projectId: string, input: CreateContactInput, query?: ContactQuery): Promise<ContactRow> {
  const username = text(input.username, 'username', { required: true, max: 255 })!;
  const phoneNumber = text(input.phone_number, 'phone_number', { required: true, max: 255 })!;
  const avatarUrl = httpUrl(input.avatar_url, 'avatar_url') ?? null;
  const displayName = text(input.display_name, 'display_name', { max: 255 }) ?? null;
  return (await rt.db.prisma.contact.create({
    data: {
      id: newId('ct'),
      projectId,
      username,
      phoneNumber,
      avatarUrl,
      displayName,
      conversation: { create: { id: newId('conv'), projectId } },
    },
    include: includeWith(query),
  })) as ContactRow;
}

export async function getContact(rt: Rt, projectId: string, id: string, query?: ContactQuery): Promise<ContactRow> {
  const row = await rt.db.prisma.contact.findFirst({ where: { id, projectId }, include: includeWith(query) });
  if (!row) throw new NotFound('contact', id);
  return row as ContactRow;
}

export interface ContactFilters {
  /** true: contacts with a last_active_at; false: those without. */
  active?: boolean | null;
}

function contactWhere(projectId: string, filters: ContactFilters): Prisma.ContactWhereInput {
  const where: Prisma.ContactWhereInput = { projectId };
  if (filters.active === true) where.lastActiveAt = { not: null };
  if (filters.active === false) where.lastActiveAt = null;
  return where;
}

export async function listContacts(rt: Rt, projectId: string, req: IdPageRequest & ContactFilters): Promise<IdPage<ContactRow>> {
  return idPage<ContactRow>(req, {
    exists: (id) => contactExists(rt, projectId, id),
    fetch: (beyond, order, take) => readContactPage(rt, projectId, req.active, beyond, order, take),
  });
}

/** Newest first, for Relay connections: `query` carries the connection's take/skip/cursor. */
export async function findContacts(rt: Rt, projectId: string, filters: ContactFilters, query: Omit<Prisma.ContactFindManyArgs, 'where' | 'orderBy'>) {
  return rt.db.prisma.contact.findMany({ ...query, where: contactWhere(projectId, filters), orderBy: { id: 'desc' } });
}

/** `display_name` is the only attribute that changes; null clears it (the username shows instead). */
export async function updateContact(rt: Rt, projectId: string, id: string, input: { display_name?: unknown }, query?: ContactQuery): Promise<ContactRow> {
  if (input.display_name === undefined) return getContact(rt, projectId, id, query);
  const displayName = input.display_name === null ? null : text(input.display_name, 'display_name', { max: 255 }) ?? null;
  try {
    return (await rt.db.prisma.contact.update({ where: { id, projectId }, data: { displayName }, include: includeWith(query) })) as ContactRow;
  } catch (err) {
    if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2025') throw new NotFound('contact', id);
    throw err;
  }
}

/** Deletes the contact; its conversation and that conversation's messages go with it (foreign keys cascade). */
export async function deleteContact(rt: Rt, projectId: string, id: string) {
  const { count } = await rt.db.prisma.contact.deleteMany({ where: { id, projectId } });
  if (count === 0) throw new NotFound('contact', id);
  return { id, deleted: true as const };
}
