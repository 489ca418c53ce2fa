// Shared building blocks of every page: data hooks, errors, empty states, confirmations, fields.
import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';
import { toJson, type Json } from './graphql.ts';

export interface Query<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload(): void;
  setData(update: (prev: T | undefined) => T | undefined): void;
}

/** Loads data with `load` whenever `deps` change; errors are kept as the API's message. */
export function useQuery<T>(load: () => Promise<T>, deps: unknown[]): Query<T> {
  const [state, setState] = useState<{ data?: T; error?: ApiError; loading: boolean }>({ loading: true });
  const [nonce, setNonce] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error) => live && setState({ error: asApiError(error), loading: false }),
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, nonce]);
  return {
    data: state.data,
    error: state.error,
    loading: state.loading,
    reload: useCallback(() => setNonce((n) => n + 1), []),
    setData: useCallback((update) => setState((s) => ({ ...s, data: update(s.data) })), []),
  };
}

export function asApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(e instanceof Error ? e.message : String(e), 'error');
}

/** Runs a mutation from a button or form: pending state, and the API's error message when it fails. */
export function useAction<A extends unknown[], R>(run: (...args: A) => Promise<R>) {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ApiError>();
  const [done, setDone] = useState(false);
  const call = async (...args: A): Promise<R | undefined> => {
    setPending(true);
    setError(undefined);
    setDone(false);
    try {
      const result = await run(...args);
      setDone(true);
      return result;
    } catch (e) {
      setError(asApiError(e));
      return undefined;
    } finally {
      setPending(false);
    }
  };
  /** `done`: the last call succeeded (until the next one starts). */
  return { call, pending, error, done, clearError: () => setError(undefined) };
}

/** What a form's action is: `useAction` of a function of the form. */
export type Action = { call(form: HTMLFormElement): Promise<unknown>; pending: boolean; error: ApiError | undefined; done: boolean };

/**
 * The one action form: its fields (children), the action's error, the notice once it succeeded,
 * and the submit button (disabled while pending). `class="row"`: the fields and the button on one
 * line, the error and notice under it.
 */
export function ActionForm({ action, submit, done, children, class: cls = 'stack', formKey }: { action: Action; submit: string; done?: ComponentChildren; children: ComponentChildren; class?: 'stack' | 'row'; formKey?: string }) {
  const button = (
    <button type="submit" class="primary" disabled={action.pending}>
      {submit}
    </button>
  );
  const after = (
    <>
      <ErrorBanner error={action.error} />
      {done && action.done ? (
        <p class="success-banner" role="status">
          {done}
        </p>
      ) : null}
    </>
  );
  return (
    <>
      <form
        class={cls}
        key={formKey}
        onSubmit={(e) => {
          e.preventDefault();
          void action.call(e.currentTarget);
        }}
      >
        {children}
        {cls === 'row' ? button : after}
        {cls === 'row' ? null : <div class="row">{button}</div>}
      </form>
      {cls === 'row' ? after : null}
    </>
  );
}

/** A table with `scope="col"` headers; `actions`: a last column for buttons, named for screen readers. */
export function Table<T>({ label, columns, actions, items, row }: { label: string; columns: ComponentChildren[]; actions?: boolean; items: readonly T[]; row: (item: T) => ComponentChildren }) {
  return (
    <div class="table-wrap">
      <table aria-label={label}>
        <thead>
          <tr>
            {columns.map((c, i) => (
              <th scope="col" key={i}>
                {c}
              </th>
            ))}
            {actions ? (
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            ) : null}
          </tr>
        </thead>
        <tbody>{items.map(row)}</tbody>
      </table>
    </div>
  );
}

/**
 * A table row: one `<td>` per cell, in the columns' order (the actions' cell last); the other
 * attributes (`key`, `class`, `data-*`) go on the `<tr>`.
 */
export function Row({ cells, ...attrs }: { cells: ComponentChildren[] } & JSX.HTMLAttributes<HTMLTableRowElement>) {
  return (
    <tr {...attrs}>
      {cells.map((cell, i) => (
        <td key={i}>{cell}</td>
      ))}
    </tr>
  );
}

/** A page's "New …" button: opens its create form, and closes it again (then says Close). */
export function CreateToggle({ open, onToggle, label }: { open: boolean; onToggle: (open: boolean) => void; label: string }) {
  return (
    <button type="button" class="primary" aria-expanded={open} onClick={() => onToggle(!open)}>
      {open ? 'Close' : label}
    </button>
  );
}

/** A section's Refresh button for its list (`usePaged` or `useQuery`): loads it again; disabled while it loads. */
export function RefreshButton({ list }: { list: { reload(): void; loading: boolean } }) {
  return (
    <button type="button" class="small" onClick={list.reload} disabled={list.loading}>
      Refresh
    </button>
  );
}

/** What `PagedTable` shows: a `usePaged` list. */
export type PagedList<T> = { items: T[]; loading: boolean; error: ApiError | undefined; cursor: string | null | undefined; pending: boolean; loadMore(): Promise<void> };

/**
 * The one paged scaffold: the list's error (or `error`, an action's), loading, the empty state
 * (`empty`, shown when the list is empty and did not fail), the items (`children`) and "Load more".
 */
function Paged<T>({ list, error, empty, children }: { list: PagedList<T>; error?: ApiError; empty: ComponentChildren; children: ComponentChildren }) {
  return (
    <>
      <ErrorBanner error={list.error ?? error} />
      {list.loading && !list.items.length ? <Loading /> : null}
      {!list.loading && !list.error && list.items.length === 0 ? empty : null}
      {children}
      <LoadMore cursor={list.cursor} onMore={() => void list.loadMore()} pending={list.pending} />
    </>
  );
}

/** The one paged table: `Paged` around a `Table` of the list's items. */
export function PagedTable<T>({ list, error, empty, ...table }: { list: PagedList<T>; error?: ApiError; empty: ComponentChildren; label: string; columns: ComponentChildren[]; actions?: boolean; row: (item: T) => ComponentChildren }) {
  return (
    <Paged list={list} error={error} empty={empty}>
      {list.items.length ? <Table {...table} items={list.items} /> : null}
    </Paged>
  );
}

/** The paged list of cards (alert rules, schedules, drains): `Paged` around a `<ul>` of `card(item)`, each an `<li class="card">`. */
export function PagedCards<T>({ list, error, empty, card }: { list: PagedList<T>; error?: ApiError; empty: ComponentChildren; card: (item: T) => ComponentChildren }) {
  return (
    <Paged list={list} error={error} empty={empty}>
      <ul class="list stack">{list.items.map(card)}</ul>
    </Paged>
  );
}

export function ErrorBanner({ error }: { error: ApiError | undefined }) {
  if (!error) return null;
  return (
    <div class="error-banner" role="alert">
      <strong>{error.message}</strong>
      {error.code && error.code !== 'error' ? <span class="muted"> ({error.code})</span> : null}
    </div>
  );
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p class="muted" role="status" aria-live="polite">
      {label}
    </p>
  );
}

export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <h3>{title}</h3>
      {children}
    </div>
  );
}

export function Page({ title, actions, children }: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · Relay dashboard`;
  }, [title]);
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-header">
        <h1 id="page-title" tabIndex={-1}>
          {title}
        </h1>
        {actions ? <div class="actions">{actions}</div> : null}
      </header>
      {children}
    </section>
  );
}

/** The anchor id of a section title ("Routing rules" → "routing-rules"), for in-page links. */
export function slug(title: string): string {
  return title.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
}

export function Section({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="card" id={slug(title)}>
      <header class="card-header">
        <h2>{title}</h2>
        {actions}
      </header>
      {children}
    </section>
  );
}

const STATUS_TONE: Record<string, string> = {
  active: 'ok',
  succeeded: 'ok',
  enabled: 'ok',
  paused: 'warn',
  retrying: 'warn',
  scheduled: 'info',
  queued: 'info',
  delivering: 'info',
  pending: 'warn',
  archived: 'muted',
  cancelled: 'muted',
  redriven: 'muted',
  failed: 'bad',
  revoked: 'bad',
  disabled: 'warn',
  ok: 'ok',
  sent: 'ok',
  resolved: 'ok',
  firing: 'bad',
  error: 'bad',
  cpu_limit: 'bad',
  memory_limit: 'bad',
  subrequest_limit: 'bad',
  egress_blocked: 'bad',
};

export function Badge({ value }: { value: string }) {
  return <span class={`badge tone-${STATUS_TONE[value] ?? 'muted'}`}>{value}</span>;
}

export function Time({ value }: { value: string | number | null | undefined }) {
  if (value === null || value === undefined || value === '') return <span class="muted">—</span>;
  const d = typeof value === 'number' ? new Date(value * 1000) : new Date(value);
  return (
    <time dateTime={d.toISOString()} title={d.toISOString()}>
      {d.toLocaleString()}
    </time>
  );
}

export function Code({ children }: { children: ComponentChildren }) {
  return <pre class="code">{children}</pre>;
}

export function Json({ value }: { value: unknown }) {
  return <Code>{typeof value === 'string' ? value : JSON.stringify(value, null, 2)}</Code>;
}

/** A copyable value (secrets shown once, URLs). */
export function Copyable({ value, label }: { value: string; label: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <div class="copyable">
      <code aria-label={label}>{value}</code>
      <button
        type="button"
        class="small"
        onClick={async () => {
          await navigator.clipboard?.writeText(value).catch(() => {});
          setCopied(true);
        }}
      >
        {copied ? 'Copied' : 'Copy'}
      </button>
    </div>
  );
}

/**
 * A button that asks first, in a modal dialog (Escape cancels, focus returns to the button).
 * `confirmText`: the user must type it (for what cannot be undone).
 */
export function ConfirmButton(props: {
  label: string;
  title: string;
  body: ComponentChildren;
  confirmLabel?: string;
  danger?: boolean;
  /** The small button style, for actions in a card's header. */
  small?: boolean;
  confirmText?: string;
  disabled?: boolean;
  onConfirm: () => Promise<unknown> | unknown;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const [typed, setTyped] = useState('');
  const [busy, setBusy] = useState(false);
  const ok = !props.confirmText || typed === props.confirmText;
  return (
    <>
      <button type="button" class={[props.danger ? 'danger' : '', props.small ? 'small' : ''].join(' ').trim()} disabled={props.disabled} onClick={() => dialog.current?.showModal()}>
        {props.label}
      </button>
      <dialog ref={dialog} aria-labelledby={titleId} onClose={() => setTyped('')}>
        <form
          method="dialog"
          class="stack"
          onSubmit={async (e) => {
            e.preventDefault();
            if (!ok) return;
            setBusy(true);
            try {
              await props.onConfirm();
            } finally {
              setBusy(false);
              dialog.current?.close();
            }
          }}
        >
          <h2 id={titleId}>{props.title}</h2>
          <div>{props.body}</div>
          {props.confirmText ? (
            <label>
              Type <code>{props.confirmText}</code> to confirm
              <input value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autoComplete="off" />
            </label>
          ) : null}
          <div class="row">
            <button type="submit" class={props.danger ? 'danger' : 'primary'} disabled={!ok || busy}>
              {props.confirmLabel ?? props.label}
            </button>
            <button type="button" onClick={() => dialog.current?.close()}>
              Cancel
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}

type InputProps = JSX.InputHTMLAttributes<HTMLInputElement> & { label: string; hint?: ComponentChildren; name: string };

/** A field's label, its control (made by `control` with the id and the hint's id) and its hint. */
function Labelled({ label, hint, control }: { label: string; hint?: ComponentChildren; control: (id: string, describedBy: string | undefined) => ComponentChildren }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {control(id, hint ? `${id}-hint` : undefined)}
      {hint ? (
        <small id={`${id}-hint`} class="muted">
          {hint}
        </small>
      ) : null}
    </div>
  );
}

/** A labelled input; `hint` is tied to it with aria-describedby. */
export function Field({ label, hint, name, ...rest }: InputProps) {
  return <Labelled label={label} hint={hint} control={(id, describedBy) => <input id={id} name={name} aria-describedby={describedBy} {...rest} />} />;
}

export function TextArea({ label, hint, name, ...rest }: JSX.TextareaHTMLAttributes<HTMLTextAreaElement> & { label: string; hint?: ComponentChildren; name: string }) {
  return <Labelled label={label} hint={hint} control={(id, describedBy) => <textarea id={id} name={name} spellcheck={false} aria-describedby={describedBy} {...rest} />} />;
}

export function Select({ label, name, options, hint, defaultValue, ...rest }: JSX.SelectHTMLAttributes<HTMLSelectElement> & { label: string; name: string; hint?: ComponentChildren; options: [string, string][] }) {
  // `defaultValue` is no property of a <select>, so Preact would set nothing: the option is marked
  // `selected` instead (set once, when the option is made: a later render leaves the user's choice).
  const initial = defaultValue === undefined || defaultValue === null ? undefined : String(defaultValue);
  return (
    <Labelled
      label={label}
      hint={hint}
      control={(id, describedBy) => (
        <select id={id} name={name} aria-describedby={describedBy} {...rest}>
          {options.map(([v, l]) => (
            <option value={v} key={v} selected={initial === undefined ? undefined : v === initial}>
              {l}
            </option>
          ))}
        </select>
      )}
    />
  );
}

/** Parses a JSON text field; throws an ApiError naming the field when it is not JSON. */
export function parseJsonField(text: string, field: string): Json | undefined {
  if (!text.trim()) return undefined;
  try {
    return toJson(JSON.parse(text));
  } catch {
    throw new ApiError(`${field} must be valid JSON.`, 'invalid_request');
  }
}

/** "Load more" for the API's cursor pages. */
export function LoadMore({ cursor, onMore, pending }: { cursor: string | null | undefined; onMore: () => void; pending?: boolean }) {
  if (!cursor) return null;
  return (
    <div class="load-more">
      <button type="button" onClick={onMore} disabled={pending}>
        {pending ? 'Loading…' : 'Load more'}
      </button>
    </div>
  );
}

/** Keeps an item list with a cursor, loading the next page on demand. */
export function usePaged<T>(load: (cursor: string | null) => Promise<{ items: T[]; nextCursor: string | null }>, deps: unknown[]) {
  const first = useQuery(() => load(null), deps);
  const [more, setMore] = useState<{ items: T[]; nextCursor: string | null } | null>(null);
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ApiError>();
  useEffect(() => setMore(null), [first.data]);
  const items = [...(first.data?.items ?? []), ...(more?.items ?? [])];
  const cursor = more ? more.nextCursor : first.data?.nextCursor;
  return {
    items,
    cursor,
    loading: first.loading,
    error: first.error ?? error,
    pending,
    reload: first.reload,
    setItems: (update: (items: T[]) => T[]) => {
      first.setData((d) => (d ? { ...d, items: update(d.items) } : d));
    },
    async loadMore() {
      if (!cursor) return;
      setPending(true);
      try {
        const page = await load(cursor);
        setMore((m) => ({ items: [...(m?.items ?? []), ...page.items], nextCursor: page.nextCursor }));
      } catch (e) {
        setError(asApiError(e));
      } finally {
        setPending(false);
      }
    },
  };
}

/** The JSON of a form's inputs, by name (strings; empty ones left out). */
export function formValues(form: HTMLFormElement): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of new FormData(form)) if (typeof v === 'string' && v !== '') out[k] = v;
  return out;
}

/** One text input of a form by name: its string, or undefined when empty (an optional variable left out). */
export function formText(f: FormData, name: string): string | undefined {
  const v = f.get(name);
  return typeof v === 'string' && v !== '' ? v : undefined;
}
