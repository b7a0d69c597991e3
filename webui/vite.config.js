// Builds into the Python package (ragkit/server/webui/dist), which `ragkit serve`
// serves at /. Names carry no content hash: the output is committed and a
// rebuild from the same lock file gives the same files (no churn in diffs).
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  build: {
    outDir: '../ragkit/server/webui/dist',
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 600,
    rollupOptions: {
      output: {
        entryFileNames: 'assets/[name].js',
        chunkFileNames: 'assets/[name].js',
        assetFileNames: 'assets/[name][extname]',
      },
    },
  },
});
