/// <reference types="vitest/config" />
// The web UI's build: `vite build` writes the app into the team service's package
// (agentica_team/web_dist), where `agentica serve` serves it; `npm run dev` proxies the API to
// a service on 127.0.0.1:8000 (AGENTICA_API to change).
import react from "@vitejs/plugin-react";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const api = process.env.AGENTICA_API ?? "http://127.0.0.1:8000";
const outDir = fileURLToPath(
  new URL("../packages/agentica-team/src/agentica_team/web_dist", import.meta.url),
);

export default defineConfig({
  plugins: [react()],
  build: { outDir, emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 400 },
  server: { proxy: { "/api": api, "/v1": api } },
  test: {
    environment: "jsdom",
    globals: true,
    setupFiles: ["src/test-setup.ts"],
    include: ["src/**/*.test.{ts,tsx}"],
  },
});
