// Component-test helpers: a fake service behind the typed client (its GET/POST/PATCH/DELETE
// answered by handlers keyed by the OpenAPI path, every call recorded), a page rendered with
// the router, the query cache and the login, and an axe check.
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import axe from "axe-core";
import type { ReactElement } from "react";
import { MemoryRouter, Route, Routes } from "react-router";
import { vi } from "vitest";
import { api } from "../api/client";
import { AuthProvider } from "../auth";

type Method = "GET" | "POST" | "PATCH" | "DELETE";

export interface Call {
  method: Method;
  path: string;
  params: { path?: Record<string, unknown>; query?: Record<string, unknown> };
  body: unknown;
}

/** Thrown by a handler: the service answers `status` with `{"error": {...}}`. */
export class Refuse {
  constructor(
    readonly status: number,
    readonly error: Record<string, unknown>,
  ) {}
}

type Handler = (call: Call) => unknown;

export class FakeApi {
  calls: Call[] = [];
  private handlers = new Map<string, Handler>();

  on(method: Method, path: string, answer: unknown): this {
    this.handlers.set(
      `${method} ${path}`,
      typeof answer === "function" ? (answer as Handler) : () => answer,
    );
    return this;
  }

  called(method: Method, path: string): Call[] {
    return this.calls.filter((c) => c.method === method && c.path === path);
  }

  install(): void {
    for (const method of ["GET", "POST", "PATCH", "DELETE"] as const) {
      vi.spyOn(api, method).mockImplementation((async (path: string, init?: Partial<Call>) => {
        const call: Call = {
          method,
          path,
          params: (init?.params ?? {}) as Call["params"],
          body: init?.body,
        };
        this.calls.push(call);
        const handler = this.handlers.get(`${method} ${path}`);
        try {
          if (!handler) throw new Refuse(404, { type: "not_found", message: `no fake ${method} ${path}` });
          const data = await handler(call);
          return { data, error: undefined, response: { ok: true, status: 200 } as Response };
        } catch (refusal) {
          if (!(refusal instanceof Refuse)) throw refusal;
          return {
            data: undefined,
            error: { error: refusal.error },
            response: { ok: false, status: refusal.status } as Response,
          };
        }
      }) as never);
    }
  }
}

export const student = {
  id: "u_alice",
  email: "alice@school.edu",
  name: "Alice",
  role: "student",
  active: true,
  created_at: 1_700_000_000,
  csrf_token: "csrf",
};

export const teacher = { ...student, id: "u_teacher", email: "t@school.edu", name: "T", role: "teacher" };

export const course = {
  id: "c1",
  name: "algo",
  title: "Algorithms",
  owner_id: "u_teacher",
  model: null,
  model_base_url: null,
  model_api_key_set: false,
  max_output_tokens: null,
  created_at: 1_700_000_000,
  runtime: "",
  role: "student",
};

export const server = {
  base_url: "http://class.example",
  gateway_url: "http://class.example/v1",
  version: "1.0",
  runtime: "serial",
  runtimes: ["serial", "batch", "lanes"],
};

/** A fake service with the logged-in user, their course and the server. */
export function fakeApi(me: object = student): FakeApi {
  const fake = new FakeApi()
    .on("GET", "/api/me", me)
    .on("GET", "/api/courses", [course])
    .on("GET", "/api/server", server);
  fake.install();
  return fake;
}

/** Render `element` at `url` (matched by `route`) inside the app's providers. */
export function renderPage(element: ReactElement, url: string, route = url) {
  const client = new QueryClient({
    defaultOptions: { queries: { retry: false }, mutations: { retry: false } },
  });
  return render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[url]}>
        <AuthProvider>
          <main>
            <Routes>
              <Route path={route} element={element} />
              <Route path="*" element={<p>elsewhere</p>} />
            </Routes>
          </main>
        </AuthProvider>
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

/** The serious and critical axe-core violations in `node` (colour contrast needs a real
 * browser's layout: left out). */
export async function axeViolations(node: Element): Promise<string[]> {
  const result = await axe.run(node, {
    resultTypes: ["violations"],
    rules: { "color-contrast": { enabled: false }, region: { enabled: false } },
  });
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
}
