// The dashboard's build: `npm run dashboard:build` (run by `npm install` / `npm ci`, see
// scripts/build-dashboard.mjs) writes dashboard/dist, which the API process serves under /dashboard.
import preact from '@preact/preset-vite';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/dashboard/',
  plugins: [preact()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    manifest: true,
    target: 'es2022',
    // Each page is its own chunk, loaded when first visited.
    chunkSizeWarningLimit: 300,
  },
  logLevel: 'warn',
});
