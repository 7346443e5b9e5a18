// Imported first by the component tests, before the API client: the client keeps the
// `fetch` and `Request` it finds when it is made, so they are replaced here by a `fetch` that
// tests point at a fake service and a `Request` that accepts the app's relative URLs.
type Fetch = typeof globalThis.fetch;

let current: Fetch = () => Promise.reject(new Error("no fake service in this test"));

export function setFakeFetch(fetch: Fetch): void {
  current = fetch;
}

const Base = globalThis.Request;
globalThis.Request = class extends Base {
  constructor(input: RequestInfo | URL, init?: RequestInit) {
    super(typeof input === "string" && input.startsWith("/") ? `http://localhost${input}` : input, init);
  }
} as typeof Request;
globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => current(input, init)) as Fetch;
