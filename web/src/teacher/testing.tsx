// Test helpers: a fake service behind `fetch` (the API client sends every request through it)
// and the teacher view rendered at a URL with a fresh query cache.
import { setFakeFetch } from "./test-fetch";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router";
import type { Schemas } from "../api/client";
import { AuthProvider } from "../auth";
import TeacherRoutes from "./TeacherRoutes";

export interface Call {
  method: string;
  path: string;
  query: URLSearchParams;
  /** A JSON body parsed, any other body as its text. */
  body: unknown;
  contentType: string | null;
}

type Handler = (call: Call) => { status?: number; body?: unknown } | undefined;

/** A fake service: `routes` maps `"METHOD /path"` to an answer (or a function of the call);
 *  every call is kept in `calls`. Unknown routes answer 404. Installed as the `fetch` the
 *  API client uses. */
export function fakeService(routes: Record<string, unknown | Handler>) {
  const calls: Call[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = input instanceof Request ? input : new Request(String(input), init);
    const url = new URL(request.url, "http://localhost");
    const text = request.method === "GET" ? "" : await request.text();
    const contentType = request.headers.get("Content-Type");
    const call: Call = {
      method: request.method,
      path: url.pathname,
      query: url.searchParams,
      body: text ? (contentType?.includes("json") ? JSON.parse(text) : text) : undefined,
      contentType,
    };
    calls.push(call);
    const route = routes[`${call.method} ${call.path}`];
    let answer: { status?: number; body?: unknown } | undefined;
    if (typeof route === "function") answer = (route as Handler)(call);
    else if (route !== undefined) answer = { body: route };
    if (!answer) {
      answer = { status: 404, body: { error: { type: "not_found", message: `no ${call.path}` } } };
    }
    const status = answer.status ?? 200;
    return new Response(status === 204 ? null : JSON.stringify(answer.body ?? null), {
      status,
      headers: { "Content-Type": "application/json" },
    });
  };
  setFakeFetch(fetch);
  return { fetch, calls };
}

export const teacher: Schemas["MeOut"] = {
  id: "usr_t",
  email: "teacher@school.edu",
  name: "Teacher",
  role: "teacher",
  active: true,
  created_at: 1_700_000_000,
  csrf_token: "csrf",
};

export const course: Schemas["CourseOut"] = {
  id: "crs_1",
  name: "web-2026",
  title: "Web 2026",
  owner_id: "usr_t",
  model: null,
  model_base_url: null,
  model_api_key_set: false,
  max_output_tokens: null,
  created_at: 1_700_000_000,
  runtime: "",
  role: "teacher",
};

export function member(id: string, email: string, role = "student"): Schemas["MemberOut"] {
  return {
    user: { id, email, name: email.split("@")[0]!, role, active: true, created_at: 1_700_000_000 },
    role,
    added_at: 1_700_000_000,
  };
}

/** The routes every page of a course reads. */
export function courseRoutes(members: Schemas["MemberOut"][]) {
  return {
    "GET /api/me": teacher,
    "GET /api/courses": [course],
    "GET /api/courses/crs_1": course,
    "GET /api/courses/crs_1/members": members,
    "GET /api/server": {
      base_url: "http://127.0.0.1:8000",
      gateway_url: "http://127.0.0.1:8000/v1",
      version: "0.1",
      runtime: "serial",
      runtimes: ["serial", "batch", "lanes"],
    },
  };
}

/** The teacher view at `path` (under /teach). */
export function renderAt(path: string) {
  const client = new QueryClient({
    defaultOptions: { queries: { retry: false, refetchOnWindowFocus: false } },
  });
  return render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[path]}>
        <AuthProvider>
          <Routes>
            <Route path="/teach/*" element={<TeacherRoutes />} />
            <Route path="*" element={<p>elsewhere</p>} />
          </Routes>
        </AuthProvider>
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

/** axe-core's serious and critical violations in `root` (colour contrast needs a real
 *  browser's layout, so it is left to the end-to-end tests). */
export async function seriousViolations(root: Element): Promise<string[]> {
  const axe = (await import("axe-core")).default;
  const result = await axe.run(root, {
    runOnly: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"],
    rules: { "color-contrast": { enabled: false }, region: { enabled: false } },
  });
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id}: ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}
