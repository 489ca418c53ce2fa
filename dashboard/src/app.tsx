// The shell: skip link, side navigation (a menu button on narrow screens), the signed-in user
// with sign-out, and the router that loads each page's chunk on first visit.
import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Link, Redirect, Route, Router, Switch, useLocation } from 'wouter-preact';
import { session } from './api.ts';
import { navHref, PAGES, type PageDef } from './pages.ts';
import { ErrorBanner, Loading, asApiError } from './ui.tsx';
import type { ApiError } from './api.ts';

const loaded = new Map<PageDef, ComponentType<{ params: Record<string, string | undefined> }>>();

function LazyPage({ def, params }: { def: PageDef; params: Record<string, string | undefined> }) {
  const [Component, setComponent] = useState(() => loaded.get(def));
  const [error, setError] = useState<ApiError>();
  useEffect(() => {
    if (Component) return;
    def.load().then(
      (m) => {
        loaded.set(def, m.default);
        setComponent(() => m.default);
      },
      (e) => setError(asApiError(e)),
    );
  }, [def]);
  if (error) return <ErrorBanner error={error} />;
  if (!Component) return <Loading />;
  return <Component params={params} />;
}

function Nav({ onNavigate }: { onNavigate: () => void }) {
  const [location] = useLocation();
  return (
    <nav aria-label="Main">
      <ul>
        {PAGES.filter((p) => p.nav).map((p) => {
          const href = navHref(p);
          const current = location === href || location.startsWith(`${href}/`);
          return (
            <li key={p.path}>
              <Link href={href} aria-current={current ? 'page' : undefined} onClick={onNavigate}>
                {p.nav}
              </Link>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}

/** Moves focus to the new page's heading after a navigation (not on the first load). */
function useFocusOnNavigate() {
  const [location] = useLocation();
  const [first, setFirst] = useState(true);
  useEffect(() => {
    if (first) return setFirst(false);
    const t = setTimeout(() => document.getElementById('page-title')?.focus(), 50);
    return () => clearTimeout(t);
  }, [location]);
}

function Shell() {
  const [menuOpen, setMenuOpen] = useState(false);
  useFocusOnNavigate();
  return (
    <div class={`shell ${menuOpen ? 'menu-open' : ''}`}>
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <button type="button" class="menu-button" aria-expanded={menuOpen} aria-controls="sidebar" onClick={() => setMenuOpen(!menuOpen)}>
          Menu
        </button>
        <Link href="/webhooks" class="brand">
          Relay
        </Link>
        <div class="user">
          <span class="muted" aria-label="Signed in as">
            {session.email}
          </span>
          <form method="post" action="/dashboard/logout">
            <input type="hidden" name="csrf" value={session.csrfToken} />
            <button type="submit" class="small">
              Sign out
            </button>
          </form>
        </div>
      </header>
      <aside id="sidebar" class="sidebar">
        <Nav onNavigate={() => setMenuOpen(false)} />
      </aside>
      <main id="main" class="content">
        <Switch>
          <Route path="/">
            <Redirect to="/webhooks" replace />
          </Route>
          {PAGES.map((def) => (
            <Route path={def.path} key={def.path}>
              {(params: Record<string, string | undefined>) => <LazyPage def={def} params={params} />}
            </Route>
          ))}
          <Route>
            <section class="page">
              <h1 id="page-title">Not found</h1>
              <p>
                This page does not exist. <Link href="/webhooks">Go to webhooks</Link>.
              </p>
            </section>
          </Route>
        </Switch>
      </main>
    </div>
  );
}

export function App() {
  return (
    <Router base="/dashboard">
      <Shell />
    </Router>
  );
}
