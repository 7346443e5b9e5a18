// Who is logged in: `GET /api/me` (a browser login is a cookie; its CSRF value is kept for the
// requests that change something). Log in and out; a 401 anywhere sends the user back here.
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { createContext, type ReactNode, useCallback, useContext, useMemo } from "react";
import { api, ApiError, type Schemas, setCsrf, unwrap } from "./api/client";

export type Me = Schemas["MeOut"];

interface Auth {
  me: Me | null;
  loading: boolean;
  /** Log in with the password or with one of the account's tokens. */
  login(email: string, secret: { password: string } | { token: string }): Promise<Me>;
  logout(): Promise<void>;
}

const AuthContext = createContext<Auth | null>(null);

async function fetchMe(): Promise<Me | null> {
  try {
    const me = unwrap(await api.GET("/api/me"));
    setCsrf(me.csrf_token);
    return me;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

export function AuthProvider({ children }: { children: ReactNode }) {
  const client = useQueryClient();
  const query = useQuery({ queryKey: ["me"], queryFn: fetchMe, staleTime: Infinity });

  const login = useCallback(
    async (email: string, secret: { password: string } | { token: string }) => {
      const me = unwrap(await api.POST("/api/auth/login", { body: { email, ...secret } }));
      setCsrf(me.csrf_token);
      // forget what another account may have loaded, but keep (and set) who is logged in
      client.removeQueries({ predicate: (query) => query.queryKey[0] !== "me" });
      client.setQueryData(["me"], me);
      return me;
    },
    [client],
  );

  const logout = useCallback(async () => {
    try {
      await api.POST("/api/auth/logout");
    } finally {
      setCsrf(null);
      client.removeQueries({ predicate: (query) => query.queryKey[0] !== "me" });
      client.setQueryData(["me"], null);
    }
  }, [client]);

  const value = useMemo<Auth>(
    () => ({ me: query.data ?? null, loading: query.isPending, login, logout }),
    [query.data, query.isPending, login, logout],
  );
  return <AuthContext.Provider value={value}>{children}</AuthContext.Provider>;
}

export function useAuth(): Auth {
  const auth = useContext(AuthContext);
  if (!auth) throw new Error("useAuth needs an <AuthProvider>");
  return auth;
}

/** Whether the account teaches (teachers and admins see the teacher view). */
export function isStaff(me: Me | null): boolean {
  return me !== null && (me.role === "teacher" || me.role === "admin");
}
